"""Per-conversation memory of the gateway: sticky pruning projections and delta decisions.

The store (``filecache.store``: SQLite by default, PostgreSQL by URL for a fleet) is the source
of truth; this process keeps a bounded cache of it (``Conversation`` objects in an LRU), so a
request costs a read of the conversation's projections and of its latest request's time, and
decisions are read from the store only by a process that has not seen the conversation yet.

What is stored per conversation (session id ``gateway:<key>``): each pruned result's
projection (tier, text) through ``Store.projection_put`` (as the library's pruning stores its
own), each pruned call input under ``gateway-input:<key>``, each delta decision (call id ->
digest of the original text and the text sent, "" for content) under ``gateway-delta:<key>``,
the time of its latest request under ``gateway-seen:<key>`` (for the cache's time to live,
written at most every 30 s), and a session row ``gateway:<key>`` touched at most once a minute
(``gc`` deletes the conversations idle too long). Nothing else: no header, no original text. A
denied file's content never reaches it: its results get no FileRef or diff, and pruning clears
them (placeholders name no content).

Concurrency: the store serialises its writes; two replicas that decide the same thing write the
same rows. The in-process LRU of conversations is guarded by one lock; a conversation's own
state is written by whichever request thread decides first (the same value by any of them).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from filecache.figures import save_session_meta, save_tally
from filecache.store.opening import open_store
from filecache.store.store import Store

__all__ = [
    "KEEP_DAYS",
    "MAX_ROWS",
    "Conversation",
    "GatewayMemory",
    "GatewayReport",
    "default_gateway_store",
    "gateway_store_path",
    "open_memory",
]

_DECISIONS = "gateway-delta"  # session of the delta decisions
_SEEN = "gateway-seen"  # session of one row: the time of the latest request
_SEEN_ID = "\x1fseen"  # that row's "call id" (no call has it)
_SEEN_EVERY = 30.0  # seconds between two writes of that time
_PREFIXES = ("gateway", "gateway-input", _DECISIONS, _SEEN)  # a conversation's sessions
_TOUCH_EVERY = 60.0  # seconds between two touches of a conversation's session row (for gc)
MAX_ROWS = 20_000
"""Rows one conversation may hold in the store (decisions and cuts); beyond, what it decides
is remembered in the process only (the same bytes while the process lives)."""
KEEP_DAYS = 30.0
"""Conversations idle longer than this many days are deleted by ``GatewayMemory.gc`` (the
gateway runs it when it starts; ``FILECACHE_GATEWAY_KEEP_DAYS`` overrides)."""
_KEEP = 256  # conversations cached in this process
_SEP = "\x1f"  # between the parts of a decision's key and value: PostgreSQL text refuses NUL


def gateway_store_path() -> Path:
    """``$XDG_CACHE_HOME/filecache/gateway/gateway.db`` (``~/.cache`` without it); creates
    nothing."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "filecache"
    return base / "gateway" / "gateway.db"


def default_gateway_store() -> Path:
    """``gateway_store_path``, its folder created 0700."""
    folder = gateway_store_path().parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    return folder / "gateway.db"


class Conversation:
    """One conversation's remembered state (``DeltaMemo`` for ``delta.plan_delta``)."""

    def __init__(self, memory: GatewayMemory, key: str) -> None:
        self.memory = memory
        self.key = key
        self.decisions: dict[str, tuple[str, str]] = {}  # call id -> (digest, text)
        self.planned_at: int | None = None  # tool-result tokens when pruning last planned
        self.last_seen: float | None = None  # time of the latest request
        self._loaded = False  # the stored decisions read (once per process)
        self._written: float | None = None  # the time this process last stored
        self._touched = -math.inf  # when this process last touched the session row
        self._rows = 0  # rows this conversation holds in the store (decisions, projections)
        self.meta: object = None  # what ``tally.record_rewrite`` last saved of it

    def _load(self) -> None:
        """The stored decisions, in one read."""
        self._loaded = True
        store = self.memory.store
        if store is None:
            return
        stored = store.projections(f"{_DECISIONS}:{self.key}")
        for call_id, (_, value) in stored.items():
            digest, _, text = value.partition(_SEP)
            self.decisions.setdefault(call_id, (digest, text))
        self._rows = len(stored)

    def get(self, call_id: str, key: str) -> str | None:
        if not self._loaded:
            self._load()
        found = self.decisions.get(call_id)
        if found is None or found[0] != key:
            return None
        return found[1]

    def put(self, call_id: str, key: str, text: str) -> None:
        if not self._loaded:
            self._load()
        new = call_id not in self.decisions
        self.decisions[call_id] = (key, text)
        store = self.memory.store
        if store is not None and (not new or self._room()):
            store.projection_put(f"{_DECISIONS}:{self.key}", call_id, "delta", f"{key}{_SEP}{text}")

    def _room(self) -> bool:
        """Whether one more row may be stored (``GatewayMemory.max_rows``); beyond it the
        conversation's new decisions and cuts are remembered in this process only."""
        if self._rows >= self.memory.max_rows:
            return False
        self._rows += 1
        return True

    def seen(self, now: float) -> float | None:
        """Record a request at ``now``; the time of the request before it (None: the first
        one any replica sharing the store has seen).

        The store keeps the time (one row, ``gateway-seen:KEY``), read on every request (a
        replica of a fleet meets the requests another one served) but written at most every
        ``_SEEN_EVERY`` seconds (a write per request cost the gateway milliseconds). So a time
        another replica wrote may be up to that much older than its latest request: it counts
        as that much later, and an expired cache is never assumed too early."""
        store = self.memory.store
        stored = None
        if store is not None:
            found = store.projections(f"{_SEEN}:{self.key}").get(_SEEN_ID)
            try:
                stored = float(found[1]) if found is not None else None
            except ValueError:
                stored = None
        if stored is None or stored == self._written:  # nobody else wrote since: ours is exact
            before = self.last_seen if self.last_seen is not None else stored
        else:
            before = max(self.last_seen or -math.inf, stored + _SEEN_EVERY)
        self.last_seen = now
        if store is not None:
            if stored is None or now - stored >= _SEEN_EVERY:
                store.projection_put(f"{_SEEN}:{self.key}", _SEEN_ID, "seen", repr(now))
                self._written = now
            self.touch(now)
        return before

    def touch(self, now: float) -> None:
        """Touch the session row ``gateway:KEY`` (``gc`` and ``filecache stats`` read it), at
        most once a minute."""
        store = self.memory.store
        if store is not None and now - self._touched >= _TOUCH_EVERY:
            self._touched = now
            store.touch_session(f"gateway:{self.key}", now)

    def projections(self) -> dict[str, tuple[str, str]]:
        """call id -> (tier, text) of every result pruned so far."""
        store = self.memory.store
        return store.projections(f"gateway:{self.key}") if store is not None else {}

    def inputs(self) -> dict[str, tuple[str, str]]:
        """call id -> (tier, arguments) of every call input pruned so far."""
        store = self.memory.store
        return store.projections(f"gateway-input:{self.key}") if store is not None else {}

    def remember(
        self, results: dict[str, tuple[str, str, int, int]], inputs: dict[str, tuple[str, str]]
    ) -> None:
        """Record new projections: call id -> (tier, text, tokens before, tokens after)."""
        store = self.memory.store
        if store is None:
            return
        for cid, (tier, text, before, after) in results.items():
            if self._room():
                store.projection_put(f"gateway:{self.key}", cid, tier, text, before, after)
        for cid, (tier, text) in inputs.items():
            if self._room():
                store.projection_put(f"gateway-input:{self.key}", cid, tier, text)


@dataclass(frozen=True)
class GatewayReport:
    """The gateway's memory in its store (``GatewayMemory.report``)."""

    conversations: int
    rows: int
    store_bytes: int | None


def _store_bytes(store: Store) -> int | None:
    path = getattr(store, "path", None)
    if not isinstance(path, Path) or not path.exists():
        return None
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


class GatewayMemory:
    """Per-conversation memory behind a store (None: nothing remembered, so no pruning)."""

    def __init__(self, store: Store | None = None, max_rows: int = MAX_ROWS) -> None:
        self.store = store
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._conversations: OrderedDict[str, Conversation] = OrderedDict()

    def conversation(self, key: str) -> Conversation:
        """The conversation ``key``'s state (made on first use)."""
        with self._lock:
            found = self._conversations.get(key)
            if found is None:
                found = self._conversations[key] = Conversation(self, key)
                if len(self._conversations) > _KEEP:
                    self._conversations.popitem(last=False)
            else:
                self._conversations.move_to_end(key)
            return found

    def report(self) -> GatewayReport:
        """What the store holds for the gateway: conversations, rows, and the store's bytes
        on disk (SQLite; None for PostgreSQL or in memory)."""
        store = self.store
        if store is None:
            return GatewayReport(0, 0, None)
        keys = [s.session_id[len("gateway:") :] for s in store.sessions()
                if s.session_id.startswith("gateway:")]  # fmt: skip
        rows = sum(
            len(store.projections(f"{prefix}:{key}")) for key in keys for prefix in _PREFIXES
        )
        return GatewayReport(len(keys), rows, _store_bytes(store))

    def gc(self, keep_days: float = KEEP_DAYS, now: float | None = None) -> int:
        """Delete the conversations whose latest request is older than ``keep_days`` days
        (their decisions, cuts and times); the number deleted. A conversation that comes back
        afterwards starts afresh (its requests are rewritten from the request alone: nothing
        can name what was deleted)."""
        store = self.store
        if store is None:
            return 0
        cutoff = (time.time() if now is None else now) - keep_days * 86_400
        old = [s.session_id[len("gateway:") :] for s in store.sessions()
               if s.session_id.startswith("gateway:") and s.last_used < cutoff]  # fmt: skip
        for key in old:
            for prefix in _PREFIXES:
                store.delete_session(f"{prefix}:{key}")
            save_tally(store, f"gateway:{key}", None)  # its figures (``tally``)
            save_session_meta(store, f"gateway:{key}", None)
            with self._lock:
                self._conversations.pop(key, None)
        return len(old)

    def close(self) -> None:
        """Release the store."""
        if self.store is not None:
            self.store.close()
            self.store = None


def open_memory(store: str | None = None) -> GatewayMemory:
    """The memory behind ``store`` (a path, ``:memory:`` or a ``postgresql://`` URL; None: the
    user's default gateway store, ``default_gateway_store``)."""
    location = store if store is not None else str(default_gateway_store())
    opened = open_store(Path("."), location)
    if location != ":memory:" and "://" not in location:
        path = Path(location)
        if path.exists():
            os.chmod(path, 0o600)
    return GatewayMemory(opened)
