"""Per-conversation memory of the gateway: sticky pruning projections and delta decisions.

The store (``filecache.store``: SQLite by default, PostgreSQL by URL for a fleet) is the source
of truth; this process keeps a bounded cache of it (``Conversation`` objects in an LRU), so a
request costs one read of the conversation's projections, and decisions are read from the store
only by a process that has not seen the conversation yet.

What is stored per conversation (session id ``gateway:<key>``): each pruned result's
projection (tier, text) through ``Store.projection_put`` (as the library's pruning stores its
own), each pruned call input under ``gateway-input:<key>``, and each delta decision (call id,
digest of the original text -> the text sent, "" for content) in the store's key-value cache,
and the time of its latest request (``gateway-seen``, for the cache's time to live). Nothing
else: no header, no original text. A denied file's content never reaches it: its
results get no FileRef or diff, and pruning clears them (placeholders name no content).

Concurrency: the store serialises its writes; two replicas that decide the same thing write the
same rows. The in-process LRU of conversations is guarded by one lock; a conversation's own
state is written by whichever request thread decides first (the same value by any of them).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from filecache.store.opening import open_store
from filecache.store.store import Store

__all__ = ["Conversation", "GatewayMemory", "default_gateway_store", "open_memory"]

_DECISIONS = "gateway-delta"
_SEEN = "gateway-seen"  # conversation -> the time of its latest request (seconds since epoch)
_KEEP = 256  # conversations cached in this process
_SEP = "\x1f"  # between the parts of a decision's key and value: PostgreSQL text refuses NUL


def default_gateway_store() -> Path:
    """``$XDG_CACHE_HOME/filecache/gateway/gateway.db`` (``~/.cache`` without it), its folder
    created 0700."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "filecache"
    folder = base / "gateway"
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
        self.last_seen: float | None = None  # time of the latest request (store: ``_SEEN``)

    def get(self, call_id: str, key: str) -> str | None:
        found = self.decisions.get(call_id)
        if found is None and self.memory.store is not None:
            value = self.memory.store.cache_get(_DECISIONS, f"{self.key}{_SEP}{call_id}")
            if value is not None:
                digest, _, text = value.partition(_SEP)
                found = self.decisions[call_id] = (digest, text)
        if found is None or found[0] != key:
            return None
        return found[1]

    def put(self, call_id: str, key: str, text: str) -> None:
        self.decisions[call_id] = (key, text)
        if self.memory.store is not None:
            self.memory.store.cache_put(
                _DECISIONS, f"{self.key}{_SEP}{call_id}", f"{key}{_SEP}{text}"
            )

    def seen(self, now: float) -> float | None:
        """Record a request at ``now``; the time of the request before it (None: the first
        one any replica sharing the store has seen). The store keeps it, so a replica that
        meets the conversation for the first time knows how long it has been idle."""
        before = self.last_seen
        store = self.memory.store
        if before is None and store is not None:
            value = store.cache_get(_SEEN, self.key)
            before = float(value) if value is not None else None
        self.last_seen = now
        if store is not None:
            store.cache_put(_SEEN, self.key, repr(now))
        return before

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
            store.projection_put(f"gateway:{self.key}", cid, tier, text, before, after)
        for cid, (tier, text) in inputs.items():
            store.projection_put(f"gateway-input:{self.key}", cid, tier, text)


class GatewayMemory:
    """Per-conversation memory behind a store (None: nothing remembered, so no pruning)."""

    def __init__(self, store: Store | None = None) -> None:
        self.store = store
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
