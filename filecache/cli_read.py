"""``filecache read`` without click: the command's work, and the command lines it answers alone.

A read is the call a shell agent makes most (one process per call), so its start is budgeted:
within 3x of ``python -c pass`` (``bench/bench_coldstart.py``). ``run_read`` is the command's
body, shared by the click command (``filecache.cli.read``) and by ``fast_read``, which the entry
point (``filecache.entry``) calls before it imports click: ``fast_read`` parses the command
lines it fully understands (``read PATH`` with the read command's own options, each given at
most once, ``--opt VALUE`` or ``--opt=VALUE``) and returns None for any other, which then goes
to click unchanged (help, a bad value, an unknown option, a root that is not a folder: click's
own messages and exit codes).

Invariant: for every command line ``fast_read`` accepts, its output, error message and exit code
are the click command's (``tests/cli/test_cli_read_fast.py`` runs both on the same lines).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["CLI_SESSION", "fast_read", "run_read"]

CLI_SESSION = "cli"
"""The session of CLI calls without ``--session``, per root (``FileCache.session`` keys it)."""

_VALUED = ("--offset", "--limit", "--mode", "--symbol", "--call-id", "--root", "--store",
           "--session")  # fmt: skip
_FLAGS = ("--fresh", "--raw", "--json")
_ENV = {"--session": "FILECACHE_SESSION", "--store": "FILECACHE_STORE"}


def run_read(
    path: str,
    *,
    offset: int | None = None,
    limit: int | None = None,
    mode: str = "auto",
    symbol: str | None = None,
    fresh: bool = False,
    raw: bool = False,
    call_id: str | None = None,
    as_json: bool = False,
    root: Path = Path("."),
    store: str | None = None,
    session: str | None = None,
) -> str:
    """The text ``filecache read`` prints (without its last newline under ``as_json``).

    Raises:
        FileCacheError: the read failed (the caller prints it in the CLI's words).
    """
    from filecache.cache import FileCache

    with FileCache(root, store=store) as cache:
        s = cache.session(session or cache.engine.settings.session or CLI_SESSION)
        result = s.read(
            path,
            offset=offset,
            limit=limit,
            mode=mode,
            symbol=symbol,
            fresh=fresh or raw,  # the file's bytes, never a FileRef or diff (read --raw > copy)
            numbered=not raw,
            call_id=call_id,
        )
        if as_json:
            return json.dumps(dataclasses.asdict(result) | {"session": s.id}, indent=2)
        return result.text


def _parse(args: Sequence[str]) -> dict[str, Any] | None:
    """The read command's options from ``args`` (after ``read``), or None: not one this parser
    answers exactly as click would."""
    from filecache.core.planner import MODES

    given: dict[str, Any] = {}
    paths: list[str] = []
    items = list(args)
    while items:
        arg = items.pop(0)
        name, eq, value = arg.partition("=")
        if name in _VALUED:
            if not eq:
                if not items:
                    return None
                value = items.pop(0)
            if name in given:
                return None
            given[name] = value
        elif arg in _FLAGS:
            if arg in given:
                return None
            given[arg] = True
        elif arg.startswith("-") or paths:
            return None  # -h, an unknown option, "--", a second path: click says what to do
        else:
            paths.append(arg)
    if len(paths) != 1:
        return None
    out: dict[str, Any] = {"path": paths[0]}
    for option in ("--offset", "--limit"):
        if option in given:
            try:
                out[option[2:]] = int(given[option])
            except ValueError:
                return None
    mode = given.get("--mode", "auto")
    if mode not in MODES:
        return None
    root = Path(given.get("--root", "."))
    if not root.is_dir() or not os.access(root, os.R_OK):
        return None  # click's Path(exists=True, file_okay=False) words it
    out.update(
        mode=mode, symbol=given.get("--symbol"), call_id=given.get("--call-id"), root=root,
        fresh="--fresh" in given, raw="--raw" in given, as_json="--json" in given,
    )  # fmt: skip
    for option, env in _ENV.items():  # click: an empty variable is unset
        out[option[2:]] = given[option] if option in given else os.environ.get(env) or None
    return out


def fast_read(argv: Sequence[str]) -> int | None:
    """Run ``filecache read`` for ``argv`` (without the program name) and return its exit
    code, or None when ``argv`` is not a read this parser answers (click takes it)."""
    from filecache.errors import FileCacheError

    if len(argv) < 2 or argv[0] != "read":
        return None
    stdout = sys.stdout
    if (getattr(stdout, "encoding", "") or "").lower().replace("-", "") != "utf8":
        return None  # click rewraps a stream it cannot trust; let it
    options = _parse(argv[1:])
    if options is None:
        return None
    try:
        text = run_read(**options)
        stdout.write(text + "\n" if options["as_json"] else text)
        stdout.flush()
    except FileCacheError as exc:
        from filecache.cli_errors import cli_message

        sys.stderr.write(f"filecache: {cli_message(str(exc), 'read')}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("\nAborted!\n")
        return 1
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stdout = _Quiet(sys.stdout)  # as click does on a closed pipe: no second error
        return 1
    return 0


class _Quiet:
    """A stream whose ``flush`` ignores a closed pipe (click's ``PacifyFlushWrapper``)."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)
