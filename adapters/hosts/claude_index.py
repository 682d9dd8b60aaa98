"""Reading a Claude Code transcript once: each hook reads only what was appended since the last.

A transcript grows to hundreds of MB in a long session, and a hook runs for every tool call:
its cost must not grow with the session. Claude Code only appends to a transcript (a rewind, a
compaction, a cleared result are new lines), so ``read_held`` keeps what ``held_of`` needs of
it in an index, a SQLite file per transcript in the user's cache folder, with the byte offset
it covers, and per call:

- reads only the complete lines after that offset, a line at a time (``complete_lines``: a line
  over ``MAX_LINE`` is skipped like a malformed one), and adds their entries as rows;
- keeps the live chain as a column (each entry's position on it, or NULL): a new newest entry
  is walked up until it meets the chain, which is cut there (a rewind) or replaced (a
  compaction's new root); only what changed is written;
- answers only for the call ids the caller relies on (``among``: the ids the session's facts
  rely on), each by a few indexed lookups.

So a call costs what was appended plus what is asked, never the session: nothing is read or
written whole. The pure ``claude_transcript.held_calls`` over the whole text is the reference
this must equal (a property test compares them on random appends, rewinds, compactions and
parallel calls).

The index is used only when it provably covers a prefix of this same file: same inode, the file
at least as long, and the same bytes at its start, at three points inside and just before the
offset. Anything else (a transcript rewritten, truncated, replaced; an index of another format
or not a database) means a parse from scratch: the index is a cache, never the authority.

Concurrency: the whole update and the answer run in one ``BEGIN IMMEDIATE`` transaction, so
parallel hooks (threads of the hook server, or processes) take turns: the second reads only
what the first left. A hook killed mid-way leaves the index as it was (SQLite's rollback). An
index that cannot be read or locked in time: nothing is known to be held (``complete=False``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from filecache.adapters.hosts.claude_transcript import Held, parse_line
from filecache.adapters.hosts.regular_files import (
    MAX_LINE,
    complete_lines,
    open_regular,
    probe,
)

from filecache.core.hashing import version_of

__all__ = ["MAX_LINE", "read_held"]

_SCHEMA = 5  # 5: a SQLite index (4 and before: one JSON file rewritten whole by every hook)
_BUSY_SECONDS = 15.0  # a parallel hook building the index of a long transcript: wait for it
_TABLES = ("meta", "entry", "bridge", "use", "result", "compacted")
_DDL = """
CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE entry (seq INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, t TEXT NOT NULL,
                    p TEXT, m TEXT, q INTEGER NOT NULL, pos INTEGER);
CREATE INDEX entry_pos ON entry(pos) WHERE pos IS NOT NULL;
CREATE INDEX entry_prompt ON entry(pos) WHERE q = 1;
CREATE INDEX entry_response ON entry(m, pos) WHERE m IS NOT NULL;
CREATE TABLE bridge (uuid TEXT PRIMARY KEY, p TEXT);
CREATE TABLE use (call TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX use_call ON use(call);
CREATE INDEX use_seq ON use(seq);
CREATE TABLE result (call TEXT NOT NULL, seq INTEGER NOT NULL, holds INTEGER NOT NULL);
CREATE INDEX result_call ON result(call);
CREATE INDEX result_seq ON result(seq);
CREATE TABLE compacted (call TEXT PRIMARY KEY);
"""


def read_held(
    path: str | Path | None,
    *,
    current: str | None = None,
    cache_dir: Path | None = None,
    sidechain: bool = False,
    among: Iterable[str] | None = None,
) -> Held:
    """What the model holds by the transcript at ``path`` (plus ``current``, the call being
    answered; ``sidechain``: a subagent's transcript), for the ids of ``among`` (None: every id
    the transcript names, which costs the session's length); a missing or unreadable transcript
    holds only ``current``. Without ``cache_dir`` the index lives in memory for this call."""
    extra = frozenset({current} if current else ())
    if not path:
        return Held(extra, extra, complete=False)
    asked = None if among is None else frozenset(among) | extra
    for attempt in (1, 2):
        try:
            transcript, size = open_regular(path)  # a FIFO or a device: refused at once
            with transcript:
                db = _connect(cache_dir, Path(path))
                try:
                    held = _Index(db, sidechain).update(transcript, size).held(asked)
                finally:
                    db.close()
            break
        except (OSError, sqlite3.Error) as error:
            if (
                attempt == 1
                and isinstance(error, sqlite3.DatabaseError)
                and not isinstance(error, sqlite3.OperationalError)  # locked, busy: kept
                and _drop(cache_dir, path)
            ):
                continue  # not a database (damaged): built again
            return Held(extra, extra, complete=False)
    return Held(
        held.ids | extra, held.pending | extra, held.complete, held.known | extra, held.asked
    )


def _connect(cache_dir: Path | None, path: Path) -> sqlite3.Connection:
    """The transcript's index (created 0600 in a 0700 folder), in a write transaction."""
    if cache_dir is None:
        db = sqlite3.connect(":memory:", isolation_level=None)
    else:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        name = _index_file(cache_dir, path)
        name.with_suffix(".json").unlink(missing_ok=True)  # a schema-4 index: never read
        os.close(os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        db = sqlite3.connect(name, timeout=_BUSY_SECONDS, isolation_level=None)
    try:
        if cache_dir is not None:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")  # a cache: a torn one is rebuilt
            db.execute("PRAGMA journal_size_limit=1048576")
        db.execute("BEGIN IMMEDIATE")
        if db.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA:
            for table in _TABLES:
                db.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _DDL.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version={_SCHEMA}")
    except BaseException:
        db.close()
        raise
    return db


def _index_file(cache_dir: Path, path: Path) -> Path:
    key = version_of(str(path.resolve()).encode("utf-8", "surrogatepass")).split(":", 1)[1]
    return cache_dir / f"{key}.sqlite"


def _drop(cache_dir: Path | None, path: str | Path) -> bool:
    """An index that is not a database (damaged) removed, to be built again."""
    if cache_dir is None:
        return False
    try:
        name = _index_file(cache_dir, Path(path))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{name}{suffix}").unlink(missing_ok=True)
    except OSError:
        return False
    return True


class _Index:
    """One transcript's index inside one write transaction (``update``, then ``held``, which
    commits)."""

    def __init__(self, db: sqlite3.Connection, sidechain: bool) -> None:
        self.db = db
        self.sidechain = sidechain
        self.meta: dict[str, Any] = {
            k: json.loads(v) for k, v in db.execute("SELECT k, v FROM meta").fetchall()
        }
        self._parents: dict[str, str | None] = {}
        self._on: dict[str, bool] = {}
        self._uses: list[tuple[str, int]] = []  # rows not written yet (``_flush``)
        self._results: list[tuple[str, int, int]] = []

    # -- reading what was appended ---------------------------------------------------------

    def update(self, transcript: BinaryIO, size: int) -> _Index:
        st = os.fstat(transcript.fileno())
        offset = self.meta.get("offset", 0)
        if not self._covers(transcript, st, size):
            self._clear()
            offset = 0
        end = offset
        marks = self._marks()
        for line, after in complete_lines(transcript, offset, size):
            if line is not None:
                self._add(line)
            end = after
        self._flush()
        if end != offset or "offset" not in self.meta:
            if self._collided(marks):
                self._put(dirty=True)  # a message named like a bridge: it ends that path now
            self._chain()
            self._put(
                offset=end,
                inode=[st.st_dev, st.st_ino],
                probe=probe(transcript, end),
                sidechain=self.sidechain,
            )
        return self

    def _covers(self, transcript: BinaryIO, st: os.stat_result, size: int) -> bool:
        offset = self.meta.get("offset")
        return (
            isinstance(offset, int)
            and 0 <= offset <= size
            and self.meta.get("inode") == [st.st_dev, st.st_ino]
            and self.meta.get("sidechain") == self.sidechain
            and self.meta.get("probe") == probe(transcript, offset)
        )

    def _clear(self) -> None:
        for table in _TABLES:
            self.db.execute(f"DELETE FROM {table}")
        self.meta = {}

    def _put(self, **values: Any) -> None:
        self.meta.update(values)
        self.db.executemany(
            "INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)",
            [(k, json.dumps(v)) for k, v in values.items()],
        )

    def _marks(self) -> tuple[int, int]:
        """The newest entry's and bridge's row ids before this update."""
        entry = self.db.execute("SELECT coalesce(max(seq), 0) FROM entry").fetchone()[0]
        bridge = self.db.execute("SELECT coalesce(max(rowid), 0) FROM bridge").fetchone()[0]
        return int(entry), int(bridge)

    def _collided(self, marks: tuple[int, int]) -> bool:
        """An entry and a bridge of one uuid, one of them new (a damaged transcript)."""
        return bool(
            self.db.execute(
                "SELECT 1 FROM entry e JOIN bridge b ON b.uuid = e.uuid WHERE e.seq > ? LIMIT 1",
                (marks[0],),
            ).fetchone()
            or self.db.execute(
                "SELECT 1 FROM bridge b JOIN entry e ON e.uuid = b.uuid WHERE b.rowid > ? LIMIT 1",
                (marks[1],),
            ).fetchone()
        )

    def _flush(self) -> None:
        if self._uses:
            self.db.executemany("INSERT INTO use (call, seq) VALUES (?, ?)", self._uses)
            self._uses = []
        if self._results:
            self.db.executemany(
                "INSERT INTO result (call, seq, holds) VALUES (?, ?, ?)", self._results
            )
            self._results = []

    def _add(self, line: bytes) -> None:
        parsed = parse_line(line, sidechain=self.sidechain)
        if parsed is None:
            return
        db = self.db
        if parsed.clearing is not None:
            self._put(clearing=parsed.clearing)
        if parsed.compacted:
            db.executemany(
                "INSERT OR IGNORE INTO compacted (call) VALUES (?)",
                [(c,) for c in parsed.compacted],
            )
        uuid = parsed.uuid
        if uuid is None:
            return
        summary = parsed.summary
        if summary is None:  # an entry between messages: the chain runs through it
            added = db.execute(
                "INSERT OR IGNORE INTO bridge (uuid, p) VALUES (?, ?)", (uuid, parsed.parent)
            )
            if added.rowcount == 0:
                old = db.execute("SELECT p FROM bridge WHERE uuid = ?", (uuid,)).fetchone()
                if old[0] != parsed.parent:
                    db.execute(
                        "INSERT OR REPLACE INTO bridge (uuid, p) VALUES (?, ?)",
                        (uuid, parsed.parent),
                    )
                    self._put(dirty=True)  # another path through it: walked again
            return
        parent = summary["p"]
        row = (summary["t"], parent, summary.get("m"), int(bool(summary.get("q"))))
        added = db.execute(
            "INSERT OR IGNORE INTO entry (uuid, t, p, m, q) VALUES (?, ?, ?, ?, ?)", (uuid, *row)
        )
        if added.rowcount == 1 and added.lastrowid is not None:
            seq = added.lastrowid
        else:  # rewritten: it keeps its place and takes the new content
            seq, old_parent = db.execute(
                "SELECT seq, p FROM entry WHERE uuid = ?", (uuid,)
            ).fetchone()
            self._flush()
            db.execute("UPDATE entry SET t = ?, p = ?, m = ?, q = ? WHERE seq = ?", (*row, seq))
            db.execute("DELETE FROM use WHERE seq = ?", (seq,))
            db.execute("DELETE FROM result WHERE seq = ?", (seq,))
            if old_parent != parent:
                self._put(dirty=True)
        self._uses.extend((c, seq) for c in summary.get("u", ()))
        self._results.extend((c, seq, int(bool(h))) for c, h in summary.get("r", ()))
        if len(self._uses) + len(self._results) > 10_000:
            self._flush()

    # -- the live chain ---------------------------------------------------------------------

    def _entry(self, uuid: str | None) -> tuple[int, str, int | None, str | None] | None:
        """(seq, type, position on the chain, message id) of a message entry."""
        if uuid is None:
            return None
        row = self.db.execute("SELECT seq, t, pos, m FROM entry WHERE uuid = ?", (uuid,)).fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def _parent(self, uuid: str) -> str | None:
        """An entry's parent message, through the bridges between them (``held_of``'s)."""
        if uuid in self._parents:
            return self._parents[uuid]
        row = self.db.execute("SELECT p FROM entry WHERE uuid = ?", (uuid,)).fetchone()
        found: str | None = row[0] if row is not None else None
        seen: set[str] = set()
        while found is not None and self._entry(found) is None:
            bridge = self.db.execute("SELECT p FROM bridge WHERE uuid = ?", (found,)).fetchone()
            if bridge is None:
                break
            if found in seen:
                found = None  # a loop: a damaged transcript
                break
            seen.add(found)
            found = bridge[0]
        self._parents[uuid] = found
        return found

    def _chain(self) -> None:
        """The chain from the newest entry back to its root, changed where it changed."""
        db = self.db
        leaf = db.execute("SELECT uuid FROM entry ORDER BY seq DESC LIMIT 1").fetchone()
        if leaf is None:
            return
        self._walk(leaf[0], meet=not self.meta.get("dirty"))
        root = db.execute("SELECT uuid FROM entry WHERE pos = 0").fetchone()
        above = self._entry(self._parent(root[0])) if root is not None else None
        if above is not None and above[2] is None:  # the root's parent came later: walk it all
            self._walk(leaf[0], meet=False)
        if self.meta.get("dirty"):
            self._put(dirty=False)

    def _walk(self, leaf: str, *, meet: bool) -> None:
        """Walk from ``leaf`` up to the root (``held_of``'s walk, one lookup an entry); with
        ``meet``, only until an entry already on the chain, which is cut above it."""
        db = self.db
        walked: list[str] = []
        seen: set[str] = set()
        bridges: set[str] = set()  # passed since the last message (a loop: the walk ends)
        cursor: str | None = leaf
        below: int | None = None
        while cursor is not None:
            row = db.execute("SELECT pos, p FROM entry WHERE uuid = ?", (cursor,)).fetchone()
            if row is None:
                bridge = db.execute("SELECT p FROM bridge WHERE uuid = ?", (cursor,)).fetchone()
                if bridge is None or cursor in bridges:
                    break
                bridges.add(cursor)
                cursor = bridge[0]
                continue
            if cursor in seen:
                break
            if meet and row[0] is not None:
                below = row[0]
                break
            walked.append(cursor)
            seen.add(cursor)
            bridges.clear()
            cursor = row[1]
        if below is None:
            db.execute("UPDATE entry SET pos = NULL WHERE pos IS NOT NULL")
        else:
            db.execute("UPDATE entry SET pos = NULL WHERE pos > ?", (below,))
        start = 0 if below is None else below + 1
        db.executemany(
            "UPDATE entry SET pos = ? WHERE uuid = ?",
            [(start + n, uuid) for n, uuid in enumerate(reversed(walked))],
        )
        self._on.clear()

    # -- what is held -----------------------------------------------------------------------

    def held(self, asked: frozenset[str] | None) -> Held:
        """``held_of`` for the ids of ``asked`` (None: every id named), and commit."""
        db = self.db
        ids = (
            asked
            if asked is not None
            else frozenset(
                r[0] for r in db.execute("SELECT call FROM use UNION SELECT call FROM result")
            )
        )
        row = db.execute(  # newest first through the index: not a scan of every prompt
            "SELECT pos FROM entry WHERE q = 1 AND pos IS NOT NULL ORDER BY pos DESC LIMIT 1"
        ).fetchone()
        last_prompt = row[0] if row is not None else -1
        held, pending, known = set(), set(), set()
        for call in ids:
            uses = db.execute(
                "SELECT e.uuid, e.seq, e.pos, e.m FROM use u JOIN entry e ON e.seq = u.seq "
                "WHERE u.call = ?",
                (call,),
            ).fetchall()
            results = db.execute(
                "SELECT e.uuid, e.pos, r.holds FROM result r JOIN entry e ON e.seq = r.seq "
                "WHERE r.call = ?",
                (call,),
            ).fetchall()
            if uses or results:
                known.add(call)
            position = self._position(uses)
            if position is None:
                continue
            if not results:
                if position > last_prompt:
                    pending.add(call)
                continue
            if all(
                holds and (pos is not None or self._on_chain(self._parent(uuid)))
                for uuid, pos, holds in results
            ):
                held.add(call)
        held = {c for c in held if not db.execute(
            "SELECT 1 FROM compacted WHERE call = ?", (c,)).fetchone()}  # fmt: skip
        db.execute("COMMIT")
        done = frozenset(pending) if self.meta.get("clearing") else frozenset(held | pending)
        return Held(done, frozenset(pending), known=frozenset(known), asked=asked)

    def _position(self, uses: list[tuple[str, int, int | None, str | None]]) -> int | None:
        """Where a call's tool_use is on the chain (``held_of``'s ``uses``): the newest
        parallel sibling naming it, else the newest chain entry naming it."""
        siblings = [(seq, m) for uuid, seq, pos, m in uses if pos is None and self._sibling(uuid)]
        if siblings:
            return self._response(max(siblings)[1])
        on = [pos for _, _, pos, _ in uses if pos is not None]
        return max(on) if on else None

    def _response(self, message: str | None) -> int | None:
        """The position of the newest chain entry of this assistant response."""
        if not message:
            return None
        row = self.db.execute(
            "SELECT pos FROM entry WHERE m = ? AND t = 'assistant' AND pos IS NOT NULL "
            "ORDER BY pos DESC LIMIT 1",
            (message,),
        ).fetchone()
        return None if row is None else int(row[0])

    def _on_chain(self, uuid: str | None) -> bool:
        """On the chain, or a parallel sibling of an entry on it."""
        found = self._entry(uuid)
        return found is not None and (found[2] is not None or self._sibling(str(uuid)))

    def _sibling(self, uuid: str) -> bool:
        """An assistant entry off the chain, of a response on it, whose parent is on it or an
        earlier such sibling (``held_of`` adds them in order)."""
        if uuid in self._on:
            return self._on[uuid]
        found = self._entry(uuid)
        yes = False
        if found is not None and found[1] == "assistant" and found[2] is None:
            seq, _, _, message = found
            if self._response(message) is not None:
                above = self._entry(self._parent(uuid))
                yes = above is not None and (
                    above[2] is not None
                    or (above[0] < seq and self._sibling(str(self._parent(uuid))))
                )
        self._on[uuid] = yes
        return yes
