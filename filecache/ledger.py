"""The ledger snapshot the pruner consumes: every call of a session and every path's writes.

Pure: built from a session's ``Event`` rows, returns frozen records. ``Session.ledger()`` is the
public way to get one (of the events its object keeps, ``turns.SessionState.events``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from operator import attrgetter
from types import MappingProxyType

from filecache.core.hashing import KEYED
from filecache.core.json_input import json_strings
from filecache.core.kinds import CHANGES, Kind, Tool
from filecache.core.records import record
from filecache.store.store import Event

__all__ = ["CallRecord", "Ledger", "LedgerFold", "WriteRecord", "build_ledger", "stale_calls"]


@record  # positional: built in one place, from ``_record_values`` of an event
class CallRecord:
    """One tool call as the ledger saw it.

    ``tool`` is read / write / edit / change / other; ``start``/``end`` the read's line range;
    ``version`` the file version the answer reflects; ``kind`` the answer's kind;
    ``base_call_id`` the newest result an unchanged/diff answer relied on and ``deps`` all of
    them; ``text_hash`` the hash of the answered text.
    """

    call_id: str
    seq: int
    tool: str
    path: str
    start: int | None
    end: int | None
    version: str | None
    base_version: str | None
    kind: str
    base_call_id: str | None
    tokens: int
    tokens_full: int
    text_hash: str | None
    deps: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


@record(kw_only=True)
class WriteRecord:
    """A change of a path: the session's own write/edit, or a change seen from outside."""

    call_id: str
    seq: int
    tool: str
    before: str | None
    after: str | None


@record(kw_only=True)
class Ledger:
    """Snapshot of a session's ledger. ``writes`` are in order per path."""

    session_id: str
    calls: Mapping[str, CallRecord]
    writes: Mapping[str, tuple[WriteRecord, ...]]

    def reads(self) -> list[CallRecord]:
        return [c for c in self.calls.values() if c.tool == Tool.READ]


_RECORD_FIELDS = tuple(f.name for f in fields(CallRecord))  # each is a field of Event too
_record_values = attrgetter(*_RECORD_FIELDS)  # an event's values of them, in CallRecord's order
_seq = attrgetter("seq")


def build_ledger(session_id: str, events: Iterable[Event]) -> Ledger:
    """Fold events (in seq order) into a snapshot; a call id seen twice keeps its last row."""
    fold = LedgerFold(session_id)
    fold.add(sorted(events, key=_seq))
    return fold.snapshot()


class LedgerFold:
    """``build_ledger`` a batch of events at a time: ``add`` folds the events that followed the
    ones already folded (in seq order), ``snapshot`` is the ledger so far (copies of the
    folded maps: a snapshot never changes). ``count`` is how many events were folded. Not
    thread-safe: its owner (``Session.ledger``) holds the session's lock."""

    __slots__ = ("_calls", "_writes", "count", "session_id")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.count = 0
        self._calls: dict[str, CallRecord] = {}
        self._writes: dict[str, list[WriteRecord]] = {}

    def add(self, events: Iterable[Event]) -> None:
        calls, writes = self._calls, self._writes
        for e in events:
            self.count += 1
            calls[e.call_id] = CallRecord(*_record_values(e))
            if e.tool in CHANGES and e.kind != Kind.ERROR:
                writes.setdefault(e.path, []).append(
                    WriteRecord(
                        call_id=e.call_id,
                        seq=e.seq,
                        tool=e.tool,
                        before=e.base_version,
                        after=e.version,
                    )
                )

    def snapshot(self) -> Ledger:
        writes = self._writes  # each path's as a tuple; no comprehension: no frame per path
        return Ledger(
            session_id=self.session_id,
            calls=MappingProxyType(dict(self._calls)),
            writes=MappingProxyType(dict(zip(writes, map(tuple, writes.values()), strict=True))),
        )


def stale_calls(
    held: Iterable[str],
    calls: Mapping[str, CallRecord],
    texts: Mapping[str, str],
    arguments: Mapping[str, object],
    text_hash: Callable[[str, bool], str],
    args_hash: Callable[[str, bool], str],
) -> set[str]:
    """The ``held`` call ids a transcript no longer backs (``Session.sync``).

    A result the view relies on must still be in the transcript (``texts``: call id -> result
    text) with exactly the text filecache answered: its ``text_hash(text, keyed)`` is the
    ledger's. A write's or edit's call must still carry what it wrote: each of the ledger's
    ``args`` is the ``args_hash(string, secret)`` of a string in the call's ``arguments``
    (call id -> its parsed arguments; a client may clear tool inputs). Keyed hashes (``KEYED``)
    are compared keyed.
    """
    gone: set[str] = set()
    for cid in held:
        record = calls.get(cid)
        text = texts.get(cid)
        if text is None:
            gone.add(cid)
        elif record is not None and record.text_hash is not None:
            keyed = record.text_hash.startswith(KEYED)
            if text_hash(text, keyed) != record.text_hash:
                gone.add(cid)
        if record is not None and record.args:  # a write/edit: its arguments must remain
            carried = set(json_strings(arguments.get(cid)))
            secret = record.args[0].startswith(KEYED)
            if not set(record.args) <= {args_hash(v, secret) for v in carried}:
                gone.add(cid)
    return gone
