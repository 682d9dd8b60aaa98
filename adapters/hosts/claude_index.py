"""Reading a Claude Code transcript once: each hook parses only what was appended since the last.

A transcript grows to tens of MB in a long session, and a hook runs for every tool call: parsing
all of it each time would cost more than the rest of the hook. Claude Code only appends to it
(a rewind, a compaction, a cleared result are new lines), so ``read_held`` keeps the scan
(``claude_transcript.scan``'s state) in an index file in the user's cache folder, with the byte
offset it covers, and parses only the complete lines after that offset.

The index is used only when it provably covers a prefix of this same file: same inode, the file
at least as long, and the same bytes at its start and just before the offset. Anything else (a
transcript rewritten, truncated, replaced; an index that is not valid JSON, e.g. two hooks
writing at once) means a full parse: the index is a cache, never the authority. It is written
atomically (a temporary file, then a rename), so a reader sees a whole index or the previous
one. A line being written (no newline yet) is left for the next hook.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from filecache.adapters.hosts.claude_transcript import Held, State, held_of, new_state, scan
from filecache.adapters.hosts.regular_files import open_regular

from filecache.core.hashing import version_of

__all__ = ["read_held"]

_PROBE = 256
_VERSION = 4  # 4: the state keeps the progress entries' bridges (a saved 3 never saw them)


def read_held(
    path: str | Path | None,
    *,
    current: str | None = None,
    cache_dir: Path | None = None,
    sidechain: bool = False,
) -> Held:
    """What the model holds by the transcript at ``path`` (plus ``current``, the call being
    answered; ``sidechain``: a subagent's transcript); a missing or unreadable transcript
    holds only ``current``."""
    extra = frozenset({current} if current else ())
    if not path:
        return Held(extra, extra, complete=False)
    try:
        transcript, size = open_regular(path)  # a FIFO or a device: refused at once
        with transcript:
            state = _scanned(transcript, Path(path), cache_dir, sidechain, size)
    except OSError:
        return Held(extra, extra, complete=False)
    held = held_of(state)
    return Held(held.ids | extra, held.pending | extra, held.complete, held.known | extra)


def _scanned(
    transcript: Any, path: Path, cache_dir: Path | None, sidechain: bool, size: int
) -> State:
    st = os.fstat(transcript.fileno())
    index = _index_path(cache_dir, path) if cache_dir is not None else None
    saved = _load(index, st) if index is not None else None
    state, offset = new_state(sidechain=sidechain), 0
    if (
        saved is not None
        and _covers(transcript, saved)
        and saved["state"].get("sidechain", False) == sidechain
    ):
        state, offset = saved["state"], int(saved["offset"])
    transcript.seek(offset)
    data = transcript.read(max(0, size - offset))  # no further than it was at the open
    end = data.rfind(b"\n") + 1  # complete lines only
    if end:
        scan(data[:end].splitlines(), state)
    if index is not None and end:
        _save(index, transcript, st, offset + end, state)
    return state


def _index_path(cache_dir: Path, path: Path) -> Path:
    key = version_of(str(path.resolve()).encode("utf-8", "surrogatepass")).split(":", 1)[1]
    return cache_dir / f"{key}.json"


def _probe(transcript: Any, offset: int) -> tuple[str, str]:
    transcript.seek(0)
    head = transcript.read(min(_PROBE, offset))
    transcript.seek(max(0, offset - _PROBE))
    tail = transcript.read(min(_PROBE, offset))
    return version_of(head), version_of(tail)


def _load(index: Path, st: os.stat_result) -> dict[str, Any] | None:
    try:
        saved = json.loads(index.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("version") != _VERSION:
        return None
    offset = saved.get("offset")
    state = saved.get("state")
    if (
        not isinstance(offset, int)
        or not 0 < offset <= st.st_size
        or saved.get("inode") != [st.st_dev, st.st_ino]
        or not isinstance(state, dict)
        or not isinstance(state.get("entries"), dict)
        or not isinstance(state.get("compacted"), list)
    ):
        return None
    return saved


def _covers(transcript: Any, saved: dict[str, Any]) -> bool:
    return list(_probe(transcript, int(saved["offset"]))) == saved.get("probe")


def _save(index: Path, transcript: Any, st: os.stat_result, offset: int, state: State) -> None:
    record = {
        "version": _VERSION,
        "inode": [st.st_dev, st.st_ino],
        "offset": offset,
        "probe": list(_probe(transcript, offset)),
        "state": state,
    }
    # Per process and thread: the hook server answers a context's parallel calls in threads.
    tmp = index.with_name(f".{index.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(record, out, separators=(",", ":"))
        os.replace(tmp, index)
    except OSError:
        tmp.unlink(missing_ok=True)  # a cache: the next hook parses again
