"""The gateway's HTTP server: aiohttp in front of the model API, ``rewrite_request`` on the way.

For a POST whose path speaks an API the transform knows (``routes.api_of``), the body is read
whole, rewritten (``filecache.gateway.rewrite_request``, which never raises and returns the input
object itself when nothing changed) and forwarded; every other request goes through unchanged
(``count_tokens``, model lists, other methods), its body streamed. The answer comes back chunk
for chunk as the upstream sends it (server-sent events are never buffered), with its status,
headers and body unchanged, errors included.

Invariants:
- Headers: everything the client sent goes upstream but the hop-by-hop ones (RFC 9110 7.6.1:
  ``Connection`` and the names it lists, ``Keep-Alive``, ``TE``, ``Trailer``,
  ``Transfer-Encoding``, ``Upgrade``, ``Proxy-*``), ``Host`` (the upstream's), ``Content-Length``
  (recomputed) and the gateway's own token. Auth headers pass through and are never stored or
  logged; nothing the client sent is written anywhere. Cookies are not kept (a dummy jar).
- Bodies are forwarded as bytes: a compressed response stays compressed (no auto-decompress),
  a request with a ``Content-Encoding`` is not rewritten.
- An upstream that fails before its answer starts: a 502 in the API's error shape, naming the
  upstream's host (never the path, which may hold the token). One that fails mid-answer: the
  client's connection is aborted, so it sees a connection error, never a shortened answer that
  looks complete.
- ``rewrite_request`` runs in one worker thread (the memory is used from that thread only), so
  a rewrite never stalls the streams of other requests.
- Figures: each request whose messages the transform parsed, once its answer was relayed
  (status below 400), is counted for its conversation (``filecache.gateway.tally``) in the
  worker thread; a failure there is one log line. On shutdown the queued counts are written
  before the memory closes.
- Logs: one line per request with counts only (API, status, tokens before/after, FileRefs,
  diffs, pruned); never a body, a header or a path.

Owned state: the client session and the worker thread (the event loop's); the route table
(registered routes are replaced whole by ``reload``); the counters (the event loop's).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from filecache.adapters.gateway.routes import Route, RouteTable, api_of

from filecache.extras import install_hint
from filecache.gateway import Api, GatewayMemory, GatewayPolicy, Rewrite, rewrite_request
from filecache.gateway.tally import host_label, record_rewrite

INSTALL_HINT = f"the gateway needs aiohttp: {install_hint('gateway')}"
try:
    import aiohttp
    from aiohttp import web
except ModuleNotFoundError as exc:  # the [gateway] extra is not installed
    if (exc.name or "").split(".")[0] not in ("aiohttp", "multidict", "yarl"):
        raise
    raise ModuleNotFoundError(INSTALL_HINT, name="aiohttp") from exc

__all__ = [
    "CONTROL_HEADER",
    "HEALTH_PATH",
    "INSTALL_HINT",
    "MAX_BODY",
    "STOP_PATH",
    "TOKEN_HEADER",
    "Gateway",
    "GatewayStats",
    "make_app",
]

HEALTH_PATH = "/_filecache/health"
STOP_PATH = "/_filecache/stop"
TOKEN_HEADER = "x-filecache-token"
CONTROL_HEADER = "x-filecache-control"
TOKEN_PREFIX = "/t/"
WEBSOCKET_REFUSED = "filecache gateway: WebSocket is not relayed; use HTTP streaming"
SHUTDOWN_WAIT = 30.0  # seconds the exit waits for the worker's queue (the figures' counts)
MAX_BODY = 256 << 20  # a request body the gateway reads whole (model requests run to ~10 MB)
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# Headers the client library would add on its own: left out unless the client sent them.
_AUTO = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
log = logging.getLogger("filecache.gateway")


@dataclass
class GatewayStats:
    """Counts since start (the event loop's)."""

    requests: int = 0
    rewritten: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    file_refs: int = 0
    diffs: int = 0
    pruned: int = 0
    upstream_errors: int = 0
    conversations: set[str] = field(default_factory=set)

    def as_dict(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "rewritten": self.rewritten,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "file_refs": self.file_refs,
            "diffs": self.diffs,
            "pruned": self.pruned,
            "upstream_errors": self.upstream_errors,
            "conversations": len(self.conversations),
        }


@dataclass
class Gateway:
    """What one server holds. ``token``: required on every request when set (a bind beyond
    loopback); ``control``: the secret of the user's background gateway (health details,
    stop); ``reload``: called on an unknown ``/r/`` route id, returns the registered routes."""

    routes: RouteTable
    memory: GatewayMemory | None = None
    token: str | None = None
    control: str | None = None
    reload: Callable[[], dict[str, Route]] | None = None
    on_stop: Callable[[], None] | None = None
    stats: GatewayStats = field(default_factory=GatewayStats)
    last_request: float = field(default_factory=time.monotonic)
    in_flight: int = 0
    session: aiohttp.ClientSession | None = None
    worker: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="fc-rewrite")
    )

    def policy(self, route: Route) -> GatewayPolicy:
        return (
            GatewayPolicy() if route.window is None else GatewayPolicy(context_window=route.window)
        )


def make_app(gateway: Gateway) -> web.Application:
    """The aiohttp application serving ``gateway`` (its client session opens on startup)."""
    app = web.Application(client_max_size=MAX_BODY, handler_args={"max_field_size": 65536})
    app.router.add_route("*", "/{tail:.*}", partial(_handle, gateway))

    async def open_session(app: web.Application) -> None:
        gateway.session = aiohttp.ClientSession(
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None, connect=30, sock_connect=30),
            trust_env=True,  # HTTPS_PROXY / NO_PROXY, as the host itself honours them
            skip_auto_headers=_AUTO,
        )

    async def close_session(app: web.Application) -> None:
        if gateway.session is not None:
            await gateway.session.close()
        # The requests' figures still queued are counted before the memory closes (waiting
        # SHUTDOWN_WAIT seconds at most: a hung store must not hang the exit).
        with contextlib.suppress(TimeoutError, RuntimeError):
            drained = asyncio.wrap_future(gateway.worker.submit(lambda: None))
            await asyncio.wait_for(drained, SHUTDOWN_WAIT)
        gateway.worker.shutdown(wait=False)

    app.on_startup.append(open_session)
    app.on_cleanup.append(close_session)
    return app


async def _handle(gateway: Gateway, request: web.Request) -> web.StreamResponse:
    gateway.last_request = time.monotonic()
    gateway.in_flight += 1
    try:
        return await _dispatch(gateway, request)
    finally:
        gateway.in_flight -= 1
        gateway.last_request = time.monotonic()


async def _dispatch(gateway: Gateway, request: web.Request) -> web.StreamResponse:
    path = request.raw_path
    if gateway.token is not None:
        path_or_none = _authorized(gateway.token, request, path)
        if path_or_none is None:
            return _json(401, {"error": "filecache gateway: a token is required (--token)"})
        path = path_or_none
    if path.split("?", 1)[0] in (HEALTH_PATH, STOP_PATH):
        return _control(gateway, request, path.split("?", 1)[0])
    resolved = gateway.routes.resolve(path)
    if resolved is None and gateway.reload is not None:
        gateway.routes.register(gateway.reload())
        resolved = gateway.routes.resolve(path)
    if resolved is None:
        return _json(404, {"error": "filecache gateway: no such route (restart the host)"})
    route, rest = resolved
    if request.headers.get("Upgrade", "").lower() == "websocket":
        # The gateway reads requests over HTTP only. 426 makes Codex fall back to HTTP streaming
        # at once (a 404 costs it seven retries, about 7 s, before it does).
        log.info("websocket upgrade refused status=426")
        return _json(426, {"error": {"message": WEBSOCKET_REFUSED, "type": "upgrade_required"}})
    gateway.stats.requests += 1
    api = api_of(route.upstream, rest) if request.method == "POST" else None
    started = time.perf_counter()
    rewrite: Rewrite | None = None
    body = await request.read() if request.body_exists else None
    if api is not None and body is not None and not request.headers.get("Content-Encoding"):
        rewrite = await _rewrite(gateway, api, body, request, route)
        body = rewrite.body
    added_ms = (time.perf_counter() - started) * 1000
    response = await _forward(gateway, request, route, rest, body)
    _log(gateway, api, response.status, rewrite, added_ms)
    if rewrite is not None and rewrite.forms is not None and response.status < 400:
        _record(gateway, rewrite, request.headers.get("User-Agent"))
    return response


def _record(gateway: Gateway, rewrite: Rewrite, agent: str | None) -> None:
    """Count the request for its conversation's figures (``tally.record_rewrite``), in the
    worker thread after the answer went out (the memory's thread; queued behind nothing the
    client waits for). Only a fixed label of the ``User-Agent`` is kept; it never raises."""
    call = partial(
        record_rewrite, gateway.memory, rewrite.conversation, rewrite.forms, host=host_label(agent)
    )
    try:
        gateway.worker.submit(call)
    except RuntimeError:  # the worker is shutting down: the request is not counted
        log.info("request not counted for the figures (shutting down)")


def _authorized(token: str, request: web.Request, path: str) -> str | None:
    """The path with the token taken out, or None when the request does not carry it."""
    given = request.headers.get(TOKEN_HEADER)
    if given is not None:
        return path if hmac.compare_digest(given.encode(), token.encode()) else None
    if path.startswith(TOKEN_PREFIX):
        given, _, rest = path[len(TOKEN_PREFIX) :].partition("/")
        if hmac.compare_digest(given.encode(), token.encode()):
            return "/" + rest
    return None


def _control(gateway: Gateway, request: web.Request, path: str) -> web.Response:
    ours = gateway.control is not None and hmac.compare_digest(
        request.headers.get(CONTROL_HEADER, "").encode(), gateway.control.encode()
    )
    if path == STOP_PATH:
        if not ours or request.method != "POST" or gateway.on_stop is None:
            return _json(403, {"error": "filecache gateway: not allowed"})
        asyncio.get_running_loop().call_soon(gateway.on_stop)
        return _json(200, {"stopping": os.getpid()})
    info: dict[str, Any] = {"service": "filecache-gateway"}
    if ours:
        info |= {"pid": os.getpid(), "in_flight": gateway.in_flight, **gateway.stats.as_dict()}
        info["idle_seconds"] = round(time.monotonic() - gateway.last_request, 1)
    return _json(200, info)


async def _rewrite(
    gateway: Gateway, api: Api, body: bytes, request: web.Request, route: Route
) -> Rewrite:
    headers = {k.lower(): v for k, v in request.headers.items()}
    call = partial(
        rewrite_request,
        api,
        body,
        headers=headers,
        memory=gateway.memory,
        policy=gateway.policy(route),
    )
    try:
        return await asyncio.get_running_loop().run_in_executor(gateway.worker, call)
    except Exception as exc:  # the contract says it never raises; the request still goes out
        # The type only: a message or traceback could carry a piece of the request.
        log.error("the transform raised %s; forwarded unchanged", type(exc).__name__)
        return Rewrite(body, False, None, "the transform raised")


def _upstream_headers(request: web.Request) -> list[tuple[str, str]]:
    listed = {
        name.strip().lower()
        for value in request.headers.getall("Connection", [])
        for name in value.split(",")
    }
    # Expect: aiohttp's server already answered a 100-continue; the upstream gets the body.
    drop = HOP_BY_HOP | listed | {"host", "content-length", "expect", TOKEN_HEADER, CONTROL_HEADER}
    return [(k, v) for k, v in request.headers.items() if k.lower() not in drop]


def _client_headers(upstream: aiohttp.ClientResponse) -> list[tuple[str, str]]:
    listed = {
        name.strip().lower()
        for value in upstream.headers.getall("Connection", [])
        for name in value.split(",")
    }
    drop = HOP_BY_HOP | listed
    return [(k, v) for k, v in upstream.headers.items() if k.lower() not in drop]


async def _forward(
    gateway: Gateway,
    request: web.Request,
    route: Route,
    rest: str,
    body: bytes | None,
) -> web.StreamResponse:
    assert gateway.session is not None
    url = route.upstream + rest
    try:
        upstream_cm = gateway.session.request(
            request.method,
            url,
            data=body,
            headers=_upstream_headers(request),
            allow_redirects=False,
            compress=False,
        )
        upstream = await upstream_cm.__aenter__()
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        gateway.stats.upstream_errors += 1
        return _unreachable(route.upstream, rest, exc)
    try:
        return await _relay(request, upstream)
    finally:
        await upstream_cm.__aexit__(None, None, None)


async def _relay(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    response.headers.extend(_client_headers(upstream))
    length = upstream.headers.get("Content-Length")
    if length is not None and length.isdigit():
        response.content_length = int(length)
    await response.prepare(request)
    try:
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
    except (TimeoutError, aiohttp.ClientError, OSError):
        # The upstream broke off mid-answer: end the client's connection without the end of
        # the answer, so it sees an error (a truncated stream must never look complete).
        _abort(request)
        return response
    await response.write_eof()
    return response


def _abort(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.abort()


def _unreachable(upstream: str, rest: str, exc: BaseException) -> web.Response:
    host = _host(upstream)
    why = type(exc).__name__
    message = f"filecache gateway: the upstream {host} is unreachable ({why})"
    log.warning("upstream unreachable: %s (%s)", host, why)
    if rest.startswith("/v1/messages") or "anthropic" in host:
        payload: dict[str, Any] = {
            "type": "error",
            "error": {"type": "api_error", "message": message},
        }
    elif api_of(upstream, rest) == Api.GEMINI:  # Google's error shape
        payload = {"error": {"code": 502, "message": message, "status": "UNAVAILABLE"}}
    else:
        payload = {"error": {"message": message, "type": "upstream_unreachable", "code": 502}}
    return _json(502, payload)


def _host(url: str) -> str:
    """``url``'s host and port, never its user and password (``https://user:pw@host``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return host if parts.port is None else f"{host}:{parts.port}"


def _json(status: int, payload: dict[str, Any]) -> web.Response:
    return web.Response(
        status=status, body=json.dumps(payload).encode(), content_type="application/json"
    )


def _log(
    gateway: Gateway, api: Api | None, status: int, rewrite: Rewrite | None, added_ms: float
) -> None:
    stats = gateway.stats
    if rewrite is None:
        log.info("%s status=%d passthrough", api or "other", status)
        return
    counts = rewrite.counts
    if rewrite.conversation:
        stats.conversations.add(rewrite.conversation)
    stats.rewritten += int(rewrite.changed)
    stats.tokens_before += counts.tokens_before
    stats.tokens_after += counts.tokens_after
    stats.file_refs += counts.file_refs
    stats.diffs += counts.diffs
    stats.pruned += counts.pruned
    # The transform's reason for passing through is one of its fixed phrases; only letters and
    # a few marks of it are logged, so nothing of a request can ride along.
    why = re.sub(r"[^A-Za-z ()_-]", "", rewrite.passthrough)[:60]
    log.info(
        "%s status=%d changed=%d tokens=%d->%d refs=%d diffs=%d pruned=%d untouched=%d "
        "added_ms=%.1f%s",
        api,
        status,
        int(rewrite.changed),
        counts.tokens_before,
        counts.tokens_after,
        counts.file_refs,
        counts.diffs,
        counts.pruned,
        counts.untouched_blocks,
        added_ms,
        f' passthrough="{why}"' if why else "",
    )
