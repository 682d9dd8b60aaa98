"""Importers: real agent logs -> session traces (docs/design.md, "Session trace format").

``import_logs(format, sources, out_dir)`` converts logs of one agent into trace directories that
``filecache replay`` measures, so a user can see what filecache would have saved on their own
sessions. One module per format (``claude_code``, ``swe_agent``, ``mini_swe_agent``) parses a log
into a ``Recorded`` session; ``trace.write_trace`` builds ``files/`` (from a checkout, or rebuilt
from what the log's reads show, the rest marked unknown) and ``transcript.json``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from filecache.errors import PathError, RequestError
from filecache.importers.claude_code import parse_claude_code
from filecache.importers.logs import trace_name
from filecache.importers.mini_swe_agent import parse_mini_swe_agent
from filecache.importers.swe_agent import parse_swe_agent
from filecache.importers.trace import ImportResult, Recorded, UnknownFile, write_trace

__all__ = ["FORMATS", "ImportResult", "UnknownFile", "find_logs", "import_logs"]

_PARSERS: dict[str, Callable[[Path], list[Recorded]]] = {
    "claude-code": parse_claude_code,
    "swe-agent": lambda path: [parse_swe_agent(path)],
    "mini-swe-agent": lambda path: [parse_mini_swe_agent(path)],
}
FORMATS = tuple(_PARSERS)
"""The log formats ``import_logs`` reads."""

_SUFFIXES = {
    "claude-code": (".jsonl", ".jsonl.gz"),
    "swe-agent": (".traj", ".traj.gz"),
    "mini-swe-agent": (".traj.json", ".traj.json.gz"),
}


def find_logs(format: str, sources: Iterable[Path]) -> list[Path]:
    """The log files among ``sources``: files as given, directories searched for the format's
    suffixes (``.jsonl``, ``.traj``, ``.traj.json``, gzipped too), in name order."""
    found: list[Path] = []
    for source in sources:
        source = Path(source)
        if source.is_dir():
            suffixes = _SUFFIXES[format]
            found.extend(
                sorted(p for p in source.rglob("*") if p.is_file() and p.name.endswith(suffixes))
            )
        else:
            found.append(source)
    return found


def import_logs(
    format: str,
    sources: Iterable[Path],
    out_dir: Path,
    *,
    repo: Path | None = None,
    progress: Callable[[Path], None] | None = None,
    empty: Callable[[Path], None] | None = None,
) -> list[ImportResult]:
    """Convert the logs in ``sources`` into trace directories under ``out_dir``.

    Args:
        format: one of ``FORMATS``.
        sources: log files, or directories holding them.
        out_dir: where the trace directories go (one per session, named after its log).
        repo: a checkout with the files as they were before the sessions; without one,
            ``files/`` is rebuilt from the logs and what they do not show is marked unknown.
        progress: called with each log before it is read.
        empty: called with each log that holds no conversation (a Claude Code session file of
            ``summary`` lines only); it gives no trace.

    Raises:
        RequestError: an unknown format, no logs found, or no conversation in any of them.
        PathError: ``out_dir`` cannot be made or written to.
        TranscriptError: a log that is not of the format.
    """
    if format not in _PARSERS:
        raise RequestError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    logs = find_logs(format, sources)
    if not logs:
        raise RequestError(f"no {format} logs found in the given sources")
    out_dir = Path(out_dir)
    _make_output_dir(out_dir)
    results: list[ImportResult] = []
    taken: set[str] = set()
    for log in logs:
        if progress is not None:
            progress(log)
        records = _PARSERS[format](log)
        if not records and empty is not None:
            empty(log)
        _distinct_names(records, trace_name(log), taken)
        for recorded in records:
            try:
                results.append(write_trace(recorded, out_dir, repo=repo))
            except OSError as exc:  # the output directory failed under us (full, removed)
                raise PathError(
                    f"{out_dir}: cannot write the trace of {log} ({exc.strerror or exc}"
                    + (f": {exc.filename})" if exc.filename else ")")
                ) from None
    if not results:
        raise RequestError(f"no conversation in the {format} logs given (no message in any)")
    return results


def _distinct_names(records: list[Recorded], stem: str, taken: set[str]) -> None:
    """Rename ``records`` (the traces of one log, named after it) so that no trace of this import
    overwrites another: logs that share a file name (two projects' ``<id>.jsonl``, every
    task's ``claude-code.txt``) get ``<stem>-2``, ``<stem>-3``..."""
    names = [r.name for r in records]
    k = 1
    while any(n in taken for n in names):
        k += 1
        names = [
            f"{stem}-{k}{r.name[len(stem) :]}" if r.name.startswith(stem) else f"{r.name}-{k}"
            for r in records
        ]
    for recorded, name in zip(records, names, strict=True):
        if name != recorded.name:
            recorded.notes.append(
                f"named {name}: another log of this import is named {recorded.name}"
            )
            recorded.name = name
    taken.update(names)


def _make_output_dir(out_dir: Path) -> None:
    """Make ``out_dir`` (and its parents) if it is missing, and check it takes new folders.

    Raises:
        PathError: it is not a directory (or under a file), cannot be made, or is not writable.
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PathError(
            f"{out_dir}: exists and is not a directory; choose another output directory"
        ) from None
    except OSError as exc:
        raise PathError(
            f"{out_dir}: cannot make the output directory ({exc.strerror or exc})"
        ) from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise PathError(f"{out_dir}: the output directory is not writable")
