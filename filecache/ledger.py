"""The ledger snapshot the pruner consumes: every call of a session and every path's writes.

Pure: built from a session's ``Event`` rows, returns frozen records. ``Session.ledger()`` is the
public way to get one (of the events its object keeps, ``turns.SessionState.events``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
from types import MappingProxyType

from filecache.core.kinds import CHANGES, Kind, Tool
from filecache.store.store import Event

__all__ = ["CallRecord", "Ledger", "WriteRecord", "build_ledger"]


@dataclass(frozen=True)  # positional: built in one place, from ``_record_values`` of an event
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


@dataclass(frozen=True, kw_only=True)
class WriteRecord:
    """A change of a path: the session's own write/edit, or a change seen from outside."""

    call_id: str
    seq: int
    tool: str
    before: str | None
    after: str | None


@dataclass(frozen=True, kw_only=True)
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
    calls: dict[str, CallRecord] = {}
    writes: dict[str, list[WriteRecord]] = {}
    for e in sorted(events, key=_seq):
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
    return Ledger(
        session_id=session_id,
        calls=MappingProxyType(calls),
        writes=MappingProxyType({p: tuple(w) for p, w in writes.items()}),
    )
