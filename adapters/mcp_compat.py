"""The mcp SDK's 1.x and 2.x behind one face: the server class, server middleware, client roots.

filecache's MCP code is written against 2.x's ``ServerMiddleware``: an ``async (ctx, call_next)``
callable that sees every inbound request with its raw ``ctx.method`` and ``ctx.params``, before
the SDK validates or dispatches it, and may answer it, rewrite it or pass it on. On 2.x
(``mcp.server.mcpserver.MCPServer``) that is the SDK's own middleware, appended to
``server.middleware``. 1.x (``mcp.server.fastmcp.FastMCP``) has none, so ``install`` wraps the
low-level server's handlers in an equivalent chain: every request type the server handles (tools,
resources, prompts, ping, ...) and its notifications, with ``notifications/roots/list_changed``
always among them. The differences that remain on 1.x:

- The context is ``V1RequestContext``, with the fields of 2.x's ``ServerRequestContext`` that
  filecache reads (``method``, ``params``, ``request``, ``session``, ``request_id``, ...).
- ``params`` have been parsed by the SDK's request models already (their JSON form is passed on);
  a request the SDK cannot parse never reaches the chain. Tool ``arguments`` stay raw JSON.
- ``initialize`` is handled inside the 1.x session and does not pass through the chain, and a
  notification carries no HTTP request (``request`` is None).

Invariants: nothing here imports from 2.x-only or 1.x-only modules outside the version branch,
and the rest of filecache imports the SDK's server side only through this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .mcp_sessions import mcp_required

# mypy checks this module against whichever mcp is installed; the names that differ between
# 1.x and 2.x are typed Any here (``types``, ``Server``) and carry ignores that hold on both
# (``unused-ignore``). Both majors are exercised at run time (CI's test and mcp1 steps).
with mcp_required():
    import mcp.types as _types
    from pydantic import BaseModel

    try:  # mcp 2.x
        from mcp.server.context import ServerRequestContext as _ServerRequestContext
        from mcp.server.mcpserver import MCPServer as _Server

        MCP_MAJOR = 2
    except ModuleNotFoundError:  # mcp 1.x
        from mcp.server.fastmcp import (  # type: ignore[attr-defined,no-redef,unused-ignore]
            FastMCP as _Server,
        )

        MCP_MAJOR = 1
    try:  # mcp 2.x with protocol revisions (mcp.types.methods): the per-version result surface
        from mcp.types.methods import serialize_server_result as _serialize_result
    except ImportError:  # 1.x, or a 2.x before the revisions
        _serialize_result = None  # type: ignore[assignment,unused-ignore]

types: Any = _types
Server: Any = _Server

__all__ = [
    "MCP_MAJOR",
    "CallNext",
    "HandlerResult",
    "Middleware",
    "Server",
    "ServerRequestContext",
    "V1RequestContext",
    "install",
    "is_error",
    "list_client_roots",
    "new_server",
    "replace_params",
    "run",
    "wire_result",
]

HandlerResult = BaseModel | dict[str, Any] | None
"""What a handler or middleware returns (as 2.x's ``mcp.server.context.HandlerResult``)."""
CallNext = Callable[[Any], Awaitable[HandlerResult]]
"""The rest of the chain, called with the (possibly rewritten) context."""
Middleware = Callable[[Any, CallNext], Awaitable[HandlerResult]]
"""``async (ctx, call_next) -> result``: 2.x's ``ServerMiddleware`` protocol."""


@dataclass(kw_only=True)
class V1RequestContext:
    """On mcp 1.x: what 2.x's ``ServerRequestContext`` tells a middleware about a request."""

    session: Any
    lifespan_context: Any
    method: str
    params: Mapping[str, Any] | None = None
    request_id: Any = None
    meta: Any = None
    request: Any = None
    protocol_version: str | None = None


ServerRequestContext: Any = _ServerRequestContext if MCP_MAJOR == 2 else V1RequestContext
"""The context class a middleware is called with on the installed SDK."""


def new_server(
    name: str,
    *,
    instructions: str | None = None,
    lifespan: Any = None,
    host: str = "127.0.0.1",
    port: int = 8000,
) -> Any:
    """An ``MCPServer`` (2.x) or ``FastMCP`` (1.x); ``host``/``port`` for streamable HTTP."""
    if MCP_MAJOR == 2:
        return Server(name, instructions=instructions, lifespan=lifespan, log_level="WARNING")
    return Server(  # 1.x takes the HTTP address here, and guards the Host header by it
        name,
        instructions=instructions,
        lifespan=lifespan,
        log_level="WARNING",
        host=host,
        port=port,
    )


def run(server: Any, transport: str, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve over ``stdio`` or ``streamable-http`` until stopped."""
    if transport == "stdio" or MCP_MAJOR == 1:
        server.run(transport)
    else:
        server.run(transport, host=host, port=port)


def install(server: Any, middleware: Middleware) -> None:
    """Add ``middleware`` to ``server`` (innermost: after any added before it)."""
    if MCP_MAJOR == 2:
        server.middleware.append(middleware)
        return
    low = server._mcp_server  # FastMCP's low-level Server: where 1.x dispatches requests
    chain: list[Middleware] | None = getattr(low, "_filecache_middleware", None)
    if chain is None:
        chain = []
        low._filecache_middleware = chain
        for request_type, handler in list(low.request_handlers.items()):
            low.request_handlers[request_type] = _v1_request(low, request_type, handler, chain)
        notifications = {types.RootsListChangedNotification, *low.notification_handlers}
        for kind in notifications:
            original = low.notification_handlers.get(kind)
            low.notification_handlers[kind] = _v1_notification(original, chain)
    chain.append(middleware)


_ENVELOPES: dict[str, dict[str, Any]] = {
    "tools/list": {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"},
    "tools/call": {"resultType": "complete"},
}


def wire_result(ctx: Any, result: dict[str, Any]) -> dict[str, Any]:
    """``result``, answered by a middleware without ``call_next``, in the wire form of the
    connection's protocol version.

    mcp 2.x shapes a handler's result for the negotiated version (protocol 2026-07-28 requires
    ``resultType``, and ``ttlMs``/``cacheScope`` on ``tools/list``), but trusts a middleware that
    answers by itself to do the same: a client on that version (FastMCP 4's, so pydantic-ai's
    ``MCPToolset``) rejects the bare result. The SDK's defaults fill the fields; older versions
    drop them again. On 1.x, an SDK without the revisions or an unknown version: as it is.
    """
    version = getattr(ctx, "protocol_version", None)
    envelope = _ENVELOPES.get(str(getattr(ctx, "method", "")))
    if _serialize_result is None or envelope is None or not isinstance(version, str):
        return result
    try:
        shaped: dict[str, Any] = _serialize_result(ctx.method, version, {**envelope, **result})
    except (KeyError, ValueError):  # a version or method the SDK has no surface for
        return result
    return shaped


def is_error(result: Any) -> bool:
    """Whether a ``CallToolResult`` is an error (``is_error`` on 2.x, ``isError`` on 1.x)."""
    # Only the installed SDK's name: FastMCP (pydantic-ai's MCP client), once imported, answers
    # the other one on 2.x too, with a FastMCPDeprecationWarning.
    return bool(getattr(result, "is_error" if MCP_MAJOR == 2 else "isError", None))


async def list_client_roots(session: Any) -> list[str] | None:
    """The URIs of the client's roots, or None when the client does not offer roots."""
    if MCP_MAJOR == 2:
        caps = session.client_capabilities
        if caps is None or caps.roots is None or not session.can_send_request:
            return None
        result = await session.send_request(types.ListRootsRequest(), types.ListRootsResult)
    else:
        params = session.client_params
        caps = params.capabilities if params is not None else None
        if caps is None or caps.roots is None:
            return None
        result = await session.list_roots()
    return [str(root.uri) for root in result.roots]


# -- mcp 1.x: the middleware chain around the low-level handlers --------------------------------


def _through(chain: list[Middleware], last: CallNext) -> CallNext:
    call = last
    for middleware in reversed(chain):
        call = _link(middleware, call)
    return call


def _link(middleware: Middleware, call_next: CallNext) -> CallNext:
    async def call(ctx: Any) -> HandlerResult:
        return await middleware(ctx, call_next)

    return call


def _dump(model: BaseModel | None) -> dict[str, Any] | None:
    if model is None:
        return None
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


_RESULTS: dict[type, type[BaseModel]] = {}
if MCP_MAJOR == 1:
    _RESULTS = {
        types.CallToolRequest: types.CallToolResult,
        types.ListToolsRequest: types.ListToolsResult,
    }


def _as_server_result(request_type: type, result: HandlerResult) -> Any:
    if isinstance(result, types.ServerResult):
        return result
    if isinstance(result, BaseModel):
        return types.ServerResult(result)
    if result is None:
        return types.ServerResult(types.EmptyResult())
    kind = _RESULTS.get(request_type)
    if kind is not None:
        return types.ServerResult(kind.model_validate(result))
    return types.ServerResult.model_validate(result)


def _v1_request(
    low: Any,
    request_type: type[BaseModel],
    handler: Callable[[Any], Awaitable[Any]],
    chain: list[Middleware],
) -> Callable[[Any], Awaitable[Any]]:
    async def last(ctx: V1RequestContext) -> HandlerResult:
        message: dict[str, Any] = {"method": ctx.method}
        if ctx.params is not None:
            message["params"] = dict(ctx.params)
        result = await handler(request_type.model_validate(message))
        answer: HandlerResult = result.root if isinstance(result, types.ServerResult) else result
        return answer

    async def wrapped(request: Any) -> Any:
        if request is None:  # FastMCP refreshing its own tool cache: not a client's request
            return await handler(request)
        try:
            rc = low.request_context
        except LookupError:  # pragma: no cover - the SDK always sets it for a request
            rc = None
        ctx = V1RequestContext(
            session=getattr(rc, "session", None),
            lifespan_context=getattr(rc, "lifespan_context", None),
            method=request.method,
            params=_dump(getattr(request, "params", None)),
            request_id=getattr(rc, "request_id", None),
            meta=getattr(rc, "meta", None),
            request=getattr(rc, "request", None),
        )
        result = await _through(chain, last)(ctx)
        return _as_server_result(request_type, result)

    return wrapped


def _v1_notification(
    handler: Callable[[Any], Awaitable[None]] | None, chain: list[Middleware]
) -> Callable[[Any], Awaitable[None]]:
    async def wrapped(notification: Any) -> None:
        async def last(ctx: V1RequestContext) -> HandlerResult:
            if handler is not None:
                await handler(notification)
            return None

        params = _dump(getattr(notification, "params", None))
        ctx = V1RequestContext(
            session=None, lifespan_context=None, method=notification.method, params=params
        )
        await _through(chain, last)(ctx)

    return wrapped


def replace_params(ctx: Any, params: Mapping[str, Any]) -> Any:
    """``ctx`` with other ``params`` (a dataclass on both SDKs)."""
    return dataclasses.replace(ctx, params=params)
