"""filecache's request transform inside a LiteLLM proxy: a ``CustomLogger`` callback.

In the proxy's ``config.yaml`` (docs/litellm.md has a whole one)::

    litellm_settings:
      callbacks: filecache.adapters.litellm_gateway.proxy_handler

with ``FILECACHE_GATEWAY_STORE=postgresql://...`` in the proxy's environment, so that every
worker and replica shares one conversation memory. ``async_pre_call_hook`` rewrites the
conversation of each request on LiteLLM's model routes (``CALL_TYPES``): ``/v1/messages``
(``anthropic_messages``), ``/chat/completions`` (``acompletion``) and ``/responses``
(``aresponses``), with ``filecache.gateway.rewrite_payload``; LiteLLM then sends what the hook
left in ``data``.

Invariants:
- Never hurts the host: whatever fails inside filecache (the store, the transform, a bug, a
  rewrite that takes longer than ``timeout``), the hook returns ``data`` as it came and the
  request goes on unchanged; while a timed-out rewrite still holds the thread (a hung store),
  requests go on unchanged at once. It never raises, and never returns anything but ``data``
  (a string or an exception would reject the request).
- It reads only the request's own fields (``READ_KEYS``: the body the client sent, never
  LiteLLM's ``metadata`` of a chat request, ``litellm_*``, ``secret_fields`` or the caller's key
  in ``user_api_key_dict``) and, of the request's headers, only those that name a conversation
  (``ID_HEADERS``) and the ``User-Agent``, of which only a fixed label is kept
  (``filecache.gateway.tally.HOST_AGENTS``). It writes only the conversation (``messages``, or
  ``input`` on ``/responses``), replaced by a new list. So no API key reaches the transform,
  the store or a log, and nothing of LiteLLM's own bookkeeping changes.
- Figures: a request whose messages the transform parsed is counted for its conversation
  (``filecache.gateway.tally``: the request as sent against the request as it came, so
  ``filecache stats --store URL`` shows what the proxy saved) only once LiteLLM reports that
  it went upstream and succeeded: ``async_log_success_event`` of the request's
  ``litellm_call_id`` (for a stream, once it has ended), then in the transform thread. A
  request LiteLLM refuses (a rate limit or a guardrail after this hook, a budget) or whose
  upstream fails, even after retries, is never counted: ``async_post_call_failure_hook``
  forgets it, and what neither hook settles is forgotten after ``PENDING_SECONDS`` (at most
  ``PENDING_MAX`` wait at once). A failed attempt LiteLLM retries (``async_log_failure_event``)
  leaves the request waiting for the retry's outcome. A failure in counting is one log line.
- Concurrency: each process (a gunicorn or uvicorn worker, a replica) opens its own memory on its
  first request, after any fork, and runs the transform in one thread of its own (the memory is
  used from that thread only, as in the local gateway). Processes agree through the store: a
  PostgreSQL store for more than one.
- LiteLLM calls the hook only when ``async_pre_call_hook`` is defined on the instance's own class:
  configure it with arguments (``FilecacheCallback(store=...)`` in a module of your own), do not
  subclass it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from filecache.extras import requires
from filecache.gateway import (
    Api,
    CountedForms,
    GatewayMemory,
    GatewayPolicy,
    Rewrite,
    host_label,
    open_memory,
    record_rewrite,
    rewrite_payload,
)

with requires("litellm", "litellm", "the LiteLLM callback", extra="litellm"):
    from litellm.integrations.custom_logger import CustomLogger

__all__ = [
    "CALL_TYPES",
    "ID_HEADERS",
    "READ_KEYS",
    "STORE_ENV",
    "WINDOW_ENV",
    "FilecacheCallback",
    "proxy_handler",
]

log = logging.getLogger(__name__)

STORE_ENV = "FILECACHE_GATEWAY_STORE"
"""The memory's store: a ``postgresql://`` URL for a fleet (else a SQLite path; unset: the
user's gateway store, one machine only)."""
WINDOW_ENV = "FILECACHE_GATEWAY_WINDOW"
"""The context window in tokens that pruning plans for (``GatewayPolicy.context_window``)."""

CALL_TYPES: Mapping[str, Api] = {
    "anthropic_messages": Api.ANTHROPIC_MESSAGES,
    "acompletion": Api.OPENAI_CHAT,
    "completion": Api.OPENAI_CHAT,
    "aresponses": Api.OPENAI_RESPONSES,
    "responses": Api.OPENAI_RESPONSES,
}
"""LiteLLM's ``call_type`` of each route the hook rewrites; any other passes untouched."""

CONVERSATION_KEY: Mapping[Api, str] = {
    Api.ANTHROPIC_MESSAGES: "messages",
    Api.OPENAI_CHAT: "messages",
    Api.OPENAI_RESPONSES: "input",
}
"""The one field of ``data`` the hook may replace, per API."""

READ_KEYS: Mapping[Api, tuple[str, ...]] = {
    # On /v1/messages ``metadata`` is the client's own (LiteLLM keeps its own in
    # ``litellm_metadata``): Claude Code's session id is there.
    Api.ANTHROPIC_MESSAGES: ("model", "system", "tools", "metadata", "messages"),
    # On the OpenAI routes ``metadata`` is LiteLLM's (the caller's key hash among it): never read.
    Api.OPENAI_CHAT: ("model", "tools", "prompt_cache_key", "messages"),
    Api.OPENAI_RESPONSES: ("model", "instructions", "tools", "prompt_cache_key", "input"),
}
"""The fields of ``data`` the transform is given: the request body's, nothing of LiteLLM's."""

ID_HEADERS = frozenset({"x-claude-code-session-id", "session_id", "session-id", "conversation_id"})
"""Request headers that name a conversation; no other header is read."""

RETRY_STORE_SECONDS = 30.0
"""After the store failed to open, requests pass through for this long before the next try."""
PENDING_SECONDS = 3600.0
"""How long a rewritten request waits for LiteLLM's word on it before it is never counted."""
PENDING_MAX = 10_000
"""Requests waiting for LiteLLM's word at once, per process; the oldest is dropped beyond."""


@dataclass
class _Process:
    """What one process owns: its transform thread and the memory used from that thread."""

    pid: int
    executor: ThreadPoolExecutor
    memory: GatewayMemory | None = None
    failed_at: float | None = None
    stuck: Future[Any] | None = None  # a rewrite that outlived its request's timeout


@dataclass(frozen=True)
class _Pending:
    """A rewritten request waiting for LiteLLM's word before it is counted: its conversation
    and its counts (``RequestForms.counted``, computed in the transform thread right after the
    hook: digests and numbers, never the request's text, so what waits is small)."""

    process: _Process
    conversation: str | None
    counted: Future[CountedForms]
    host: str
    since: float


class FilecacheCallback(CustomLogger):  # type: ignore[misc]  # LiteLLM's class is untyped here
    """The LiteLLM proxy callback (see the module docstring).

    Args:
        store: the memory's store (a ``postgresql://`` URL, a SQLite path); None: the
            ``FILECACHE_GATEWAY_STORE`` environment variable, else the user's gateway store.
        policy: what the transform may do; None: ``GatewayPolicy()`` with the context window of
            ``FILECACHE_GATEWAY_WINDOW`` when set.
        timeout: seconds a rewrite may take before the request goes on unchanged.
    """

    def __init__(
        self,
        store: str | None = None,
        policy: GatewayPolicy | None = None,
        *,
        timeout: float = 30.0,
    ) -> None:
        super().__init__()
        self.store = store if store is not None else os.environ.get(STORE_ENV) or None
        self.policy = policy if policy is not None else _policy_from_environment()
        self.timeout = timeout
        self.counts: Counter[str] = Counter()
        """``rewritten``, ``unchanged``; ``failed`` and ``skipped`` (the thread is still in a
        rewrite that timed out): the request went on unchanged. For the figures: ``counted``
        (LiteLLM reported success), ``refused`` (it reported a failure), ``expired``."""
        self._process: _Process | None = None
        self._lock = threading.Lock()
        self._pending: OrderedDict[str, _Pending] = OrderedDict()  # by litellm_call_id

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> dict[str, Any]:
        """The request to send: ``data`` with its conversation rewritten, or as it came."""
        try:
            api = CALL_TYPES.get(str(call_type))
            if api is None or not isinstance(data, dict):
                return data
            payload = {key: data[key] for key in READ_KEYS[api] if key in data}
            headers = _id_headers(data)
            process = self._own_process()
            if process.stuck is not None and not process.stuck.done():
                # The thread is still in a rewrite that timed out (a hung store): queueing
                # behind it would cost every request the whole timeout.
                self.counts["skipped"] += 1
                return data
            future = process.executor.submit(self._rewrite, process, api, payload, headers)
            try:
                new, rewrite = await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
            except TimeoutError:
                process.stuck = future
                raise
            call_id = data.get("litellm_call_id")
            if rewrite is not None and rewrite.forms is not None and isinstance(call_id, str):
                # Counted once LiteLLM reports the upstream answered (async_log_success_event).
                host = host_label(_header(data, "user-agent"))
                counted = process.executor.submit(rewrite.forms.counted)
                pending = _Pending(process, rewrite.conversation, counted, host, time.monotonic())
                self._wait_for_word(call_id, pending)
        except Exception as exc:  # never hurt the host: the request goes on as it came
            self.counts["failed"] += 1
            log.warning("filecache: request passed through unchanged (%s)", type(exc).__name__)
            return data
        if new is None:
            self.counts["unchanged"] += 1
            return data
        data[CONVERSATION_KEY[api]] = new
        self.counts["rewritten"] += 1
        return data

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """LiteLLM's word that a request went upstream and succeeded: count it (in the
        transform thread, never awaited here)."""
        try:
            pending = self._settle(
                kwargs.get("litellm_call_id") if isinstance(kwargs, dict) else None
            )
            if pending is not None:
                self.counts["counted"] += 1
                pending.process.executor.submit(_record, pending)
        except Exception as exc:  # never hurt the host
            log.warning("filecache: a request was not counted (%s)", type(exc).__name__)

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        """LiteLLM refused the request or its upstream failed: it is never counted. Returns
        None: the error goes to the client as LiteLLM made it."""
        try:
            call_id = (
                request_data.get("litellm_call_id") if isinstance(request_data, dict) else None
            )
            if self._settle(call_id) is not None:
                self.counts["refused"] += 1
        except Exception as exc:  # never hurt the host
            log.warning("filecache: a failed request not forgotten (%s)", type(exc).__name__)

    def _wait_for_word(self, call_id: str, pending: _Pending) -> None:
        with self._lock:
            self._pending.pop(call_id, None)
            self._pending[call_id] = pending
            while self._pending:
                oldest = next(iter(self._pending.values()))
                if len(self._pending) <= PENDING_MAX and (
                    pending.since - oldest.since < PENDING_SECONDS
                ):
                    break
                self._pending.popitem(last=False)
                self.counts["expired"] += 1

    def _settle(self, call_id: object) -> _Pending | None:
        """The request ``call_id`` no longer waits: what it waited with (None: not ours)."""
        if not isinstance(call_id, str):
            return None
        with self._lock:
            return self._pending.pop(call_id, None)

    def close(self) -> None:
        """Release this process's memory and thread (the next request opens them again)."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None and process.pid == os.getpid():
            process.executor.submit(_close, process).result(timeout=self.timeout)
            process.executor.shutdown(wait=False)

    def _own_process(self) -> _Process:
        """This process's state; a forked worker starts its own (a thread does not survive a
        fork, and a store connection must not be shared with the parent)."""
        with self._lock:
            if self._process is None or self._process.pid != os.getpid():
                executor = ThreadPoolExecutor(1, thread_name_prefix="filecache-gateway")
                self._process = _Process(os.getpid(), executor)
            return self._process

    def _rewrite(
        self, process: _Process, api: Api, payload: dict[str, Any], headers: dict[str, str]
    ) -> tuple[Any, Rewrite | None]:
        """In the process's transform thread: (the new conversation, or None when unchanged;
        the rewrite, None without a memory)."""
        memory = self._memory(process)
        if memory is None:
            return None, None
        key = CONVERSATION_KEY[api]
        sent, rewrite = rewrite_payload(
            api, payload, headers=headers, memory=memory, policy=self.policy
        )
        if not rewrite.changed:
            return None, rewrite
        new = sent.get(key)
        if not isinstance(new, type(payload.get(key))):
            raise TypeError(f"the rewritten {key} is not a {type(payload.get(key)).__name__}")
        return new, rewrite

    def _memory(self, process: _Process) -> GatewayMemory | None:
        """The process's memory, opened on first use; None while the store cannot be opened
        (retried after ``RETRY_STORE_SECONDS``)."""
        if process.memory is not None:
            return process.memory
        if process.failed_at is not None:
            if time.monotonic() - process.failed_at < RETRY_STORE_SECONDS:
                return None
        try:
            process.memory = open_memory(self.store)
        except Exception as exc:
            process.failed_at = time.monotonic()
            # The type only: a store's error message may quote its URL, and so a password.
            log.warning(
                "filecache: the gateway store could not be opened (%s); requests pass through "
                "unchanged, next try in %.0f s",
                type(exc).__name__,
                RETRY_STORE_SECONDS,
            )
            return None
        process.failed_at = None
        return process.memory


def _record(pending: _Pending) -> None:
    """In the transform thread, after the job that counted the request (one thread: in order)."""
    try:
        counted = pending.counted.result(timeout=0)
    except Exception as exc:
        log.warning("filecache: a request was not counted (%s)", type(exc).__name__)
        return
    record_rewrite(pending.process.memory, pending.conversation, counted, host=pending.host)


def _close(process: _Process) -> None:
    if process.memory is not None:
        process.memory.close()
        process.memory = None


def _header(data: Mapping[str, Any], name: str) -> str | None:
    """One request header from LiteLLM's copy of them (read for a fixed label only)."""
    request = data.get("proxy_server_request")
    headers = request.get("headers") if isinstance(request, Mapping) else None
    if not isinstance(headers, Mapping):
        return None
    for key, value in headers.items():
        if str(key).lower() == name and isinstance(value, str):
            return value
    return None


def _id_headers(data: Mapping[str, Any]) -> dict[str, str]:
    """The request's conversation-id headers (``ID_HEADERS``), from LiteLLM's copy of them."""
    request = data.get("proxy_server_request")
    headers = request.get("headers") if isinstance(request, Mapping) else None
    if not isinstance(headers, Mapping):
        return {}
    return {
        str(name): value
        for name, value in headers.items()
        if str(name).lower() in ID_HEADERS and isinstance(value, str)
    }


def _policy_from_environment() -> GatewayPolicy:
    window = os.environ.get(WINDOW_ENV, "").strip()
    if window.isdigit() and int(window) > 0:
        return GatewayPolicy(context_window=int(window))
    return GatewayPolicy()


proxy_handler = FilecacheCallback()
"""The instance ``config.yaml`` names (``callbacks: filecache.adapters.litellm_gateway.
proxy_handler``), configured from the environment."""
