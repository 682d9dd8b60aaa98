"""Running the gateway: bind, say where it listens, serve until stopped (or idle).

``serve(options, on_ready)`` blocks: it binds ``options.host:options.port`` (port 0: the OS
picks), calls ``on_ready(url)`` once it listens, and serves until SIGINT/SIGTERM, a stop request
(the background gateway's), or ``options.idle`` says so. A bind beyond loopback needs a token:
``check_bind`` refuses one without.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web
from filecache.adapters.gateway.proxy import Gateway, make_app
from filecache.adapters.gateway.routes import Route, RouteTable

from filecache.gateway import open_memory
from filecache.gateway.memory import KEEP_DAYS, GatewayMemory

_LOG = logging.getLogger("filecache.gateway")

__all__ = ["ServeOptions", "check_bind", "is_loopback", "serve"]

_TICK = 1.0
# aiohttp's own loggers: what they write is reduced to an exception's type (``_Withheld``).
_AIOHTTP_LOGGERS = ("aiohttp.access", "aiohttp.client", "aiohttp.internal", "aiohttp.server",
                    "aiohttp.web", "aiohttp.websocket")  # fmt: skip


class _Withheld(logging.Filter):
    """Reduce an aiohttp log record to the type of its exception. aiohttp's parser logs the
    request line or header line it refuses, with a traceback quoting it, and that line may hold
    an API key or the gateway's token (``/t/TOKEN``): the gateway's logs never hold either."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        record.msg = "aiohttp: %s (details withheld: they may quote a header or the path)"
        record.args = (type(exc).__name__ if exc is not None else record.levelname.lower(),)
        record.exc_info = record.exc_text = record.stack_info = None
        return True


@dataclass(frozen=True)
class ServeOptions:
    """What ``filecache gateway`` and the background gateway run with.

    ``upstreams``: parsed ``--upstream`` specs; ``store``: the memory's store (None: the user's
    gateway store); ``window``: the context window of the root's routes; ``token``: required on
    every request; ``control``: the background gateway's secret; ``idle``: seconds without a
    request (and with no live client, see ``clients_alive``) after which it exits (None: never).
    """

    host: str = "127.0.0.1"
    port: int = 0
    upstreams: dict[str, str] = field(default_factory=dict)
    store: str | None = None
    window: int | None = None
    token: str | None = None
    control: str | None = None
    idle: float | None = None
    env: dict[str, str] = field(default_factory=dict)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """ValueError when ``host`` is beyond loopback and no token guards it."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"binding {host} lets other machines use your API keys' requests: give --token "
            "(or FILECACHE_GATEWAY_TOKEN); clients send it as the x-filecache-token header "
            "or as a /t/TOKEN path prefix"
        )


def serve(
    options: ServeOptions,
    on_ready: Callable[[str, int], None],
    *,
    reload: Callable[[], dict[str, Route]] | None = None,
    clients_alive: Callable[[], bool] | None = None,
) -> None:
    """Serve until stopped; see the module docstring."""
    check_bind(options.host, options.token)
    logging.getLogger("filecache.gateway").setLevel(logging.INFO)
    for name in _AIOHTTP_LOGGERS:
        aiohttp_log = logging.getLogger(name)
        if not any(isinstance(f, _Withheld) for f in aiohttp_log.filters):
            aiohttp_log.addFilter(_Withheld())
    asyncio.run(_serve(options, on_ready, reload, clients_alive))


def _collect(memory: GatewayMemory, env: Mapping[str, str]) -> None:
    """Delete the conversations idle longer than ``FILECACHE_GATEWAY_KEEP_DAYS`` (default
    ``KEEP_DAYS``) when the gateway starts; a store that fails here is used as it is."""
    try:
        days = float(env.get("FILECACHE_GATEWAY_KEEP_DAYS") or KEEP_DAYS)
        deleted = memory.gc(days)
    except Exception as exc:  # never hurt the host: serve with the store as it is
        _LOG.info("memory gc skipped (%s)", type(exc).__name__)
        return
    if deleted:
        _LOG.info("memory gc: %d idle conversations deleted", deleted)


async def _serve(
    options: ServeOptions,
    on_ready: Callable[[str, int], None],
    reload: Callable[[], dict[str, Route]] | None,
    clients_alive: Callable[[], bool] | None,
) -> None:
    routes = RouteTable(options.upstreams, options.env, options.window)
    memory = open_memory(options.store)
    _collect(memory, options.env)
    stop = asyncio.Event()
    gateway = Gateway(routes, memory, options.token, options.control, reload, on_stop=stop.set)
    if reload is not None:
        routes.register(reload())
    runner = web.AppRunner(make_app(gateway), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, options.host, options.port, reuse_address=True)
        await site.start()
        port = _bound_port(runner, options.port)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        host = f"[{options.host}]" if ":" in options.host else options.host
        on_ready(f"http://{host}:{port}", port)
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), _TICK)
            if options.idle is not None and _idle(gateway, options.idle, clients_alive):
                break
    finally:
        await runner.cleanup()
        memory.close()


def _idle(gateway: Gateway, limit: float, clients_alive: Callable[[], bool] | None) -> bool:
    if gateway.in_flight or time.monotonic() - gateway.last_request < limit:
        return False
    return clients_alive is None or not clients_alive()


def _bound_port(runner: web.AppRunner, asked: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return asked
