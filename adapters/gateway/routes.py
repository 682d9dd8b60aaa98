"""Where the gateway forwards a request: routes from a local path prefix to an upstream base URL.

A request's path is ``<prefix><rest>``; it goes to ``<upstream><rest>`` (with its query). The
prefixes:
- ``/r/<id>``: a route that ``filecache run`` registered for one host's original upstream (and
  its context window), listed in the user's routes file (``user_gateway``); ``id`` is a digest of
  the upstream and the window, so registering it again changes nothing.
- what ``--upstream PREFIX=URL`` names (``/anthropic=https://...``);
- the root: ``--upstream URL`` (everything), ``--upstream anthropic=URL`` / ``openai=URL`` /
  ``gemini=URL`` (per API family), else the provider defaults: a ``/v1/messages`` path
  (Anthropic's) to ``ANTHROPIC_BASE_URL`` or ``https://api.anthropic.com``; a Gemini path
  (``/v1beta/...``, ``/v1alpha/...``, ``/v1/models/M:method``) to ``GOOGLE_GEMINI_BASE_URL`` or
  ``https://generativelanguage.googleapis.com``; any other to the origin of ``OPENAI_BASE_URL``
  or ``https://api.openai.com`` (an OpenAI client's base URL carries ``/v1``: point it at
  ``http://127.0.0.1:PORT/v1``).

Pure: no I/O here (the routes file is read by the caller and handed over as a mapping).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from filecache.gateway import Api, api_for_path

__all__ = [
    "ANTHROPIC_DEFAULT",
    "GEMINI_DEFAULT",
    "OPENAI_DEFAULT",
    "Route",
    "RouteTable",
    "api_of",
    "check_upstream",
    "route_id",
]

ANTHROPIC_DEFAULT = "https://api.anthropic.com"
OPENAI_DEFAULT = "https://api.openai.com/v1"
GEMINI_DEFAULT = "https://generativelanguage.googleapis.com"
ROUTE_PREFIX = "/r/"


@dataclass(frozen=True)
class Route:
    """``prefix`` (``""`` for the root) → ``upstream`` (a base URL without a trailing slash);
    ``window``: the context window for the transform's policy (None: its default)."""

    prefix: str
    upstream: str
    window: int | None = None


def check_upstream(url: str) -> str:
    """``url`` as a base URL (no trailing slash); ValueError when it is not http(s)://host..."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    if parts.query or parts.fragment:
        raise ValueError(f"{url!r}: a base URL takes no query or fragment")
    return url.strip().rstrip("/")


def route_id(upstream: str, window: int | None) -> str:
    """The id of the route to ``upstream`` at ``window`` (stable: a digest of both)."""
    digest = hashlib.sha256(f"{upstream}\0{window or ''}".encode()).hexdigest()
    return digest[:16]


def api_of(upstream: str, rest: str) -> Api | None:
    """The API a forwarded request speaks: ``api_for_path`` on the upstream path, then on its
    shorter tails (``/llm/v1/messages`` → ``/v1/messages``; ``/v1`` + ``/responses``)."""
    path = urlsplit(upstream).path.rstrip("/") + rest.split("?", 1)[0]
    segments = path.split("/")[1:]
    for start in range(len(segments)):
        api = api_for_path("/" + "/".join(segments[start:]))
        if api is not None:
            return api
    return None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class RouteTable:
    """The routes of one gateway: fixed ones (the command line) and registered ones (by id)."""

    def __init__(
        self,
        upstreams: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        window: int | None = None,
    ) -> None:
        """``upstreams``: ``--upstream`` specs parsed (``parse_specs``); ``env``: where the
        provider defaults' variables are read (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``);
        ``window``: the context window of every route but the registered ones (and
        ``GOOGLE_GEMINI_BASE_URL``)."""
        self.window = window
        given = dict(upstreams or {})
        env = env or {}
        self.everything: str | None = given.pop("", "") or None
        self.anthropic = given.pop("anthropic", "") or check_upstream(
            env.get("ANTHROPIC_BASE_URL") or ANTHROPIC_DEFAULT
        )
        openai = given.pop("openai", "") or check_upstream(
            env.get("OPENAI_BASE_URL") or OPENAI_DEFAULT
        )
        # The root's OpenAI requests carry their /v1 (a client pointed at http://gw/v1).
        self.openai = openai if "openai" in (upstreams or {}) else _origin(openai)
        self.gemini = given.pop("gemini", "") or check_upstream(
            env.get("GOOGLE_GEMINI_BASE_URL") or GEMINI_DEFAULT
        )
        self.prefixed = {prefix.rstrip("/"): url for prefix, url in given.items()}
        self.registered: dict[str, Route] = {}

    def register(self, routes: Mapping[str, Route]) -> None:
        """Add or replace registered routes (by id)."""
        self.registered.update(routes)

    def resolve(self, path: str) -> tuple[Route, str] | None:
        """(the route, the rest of the path) for a request path, or None (an unknown ``/r/``
        id: the caller may reload the routes file and ask again)."""
        if path.startswith(ROUTE_PREFIX):
            ident, _, rest = path[len(ROUTE_PREFIX) :].partition("/")
            route = self.registered.get(ident)
            return None if route is None else (route, "/" + rest)
        for prefix, url in self.prefixed.items():
            if path == prefix or path.startswith(prefix + "/"):
                return Route(prefix, url, self.window), path[len(prefix) :] or "/"
        if self.everything is not None:
            return Route("", self.everything, self.window), path
        bare = path.split("?", 1)[0]
        if bare.startswith("/v1/messages"):
            return Route("", self.anthropic, self.window), path
        if bare.startswith(_GEMINI_ROOTS) or (bare.startswith("/v1/models/") and ":" in bare):
            return Route("", self.gemini, self.window), path
        return Route("", self.openai, self.window), path


_GEMINI_ROOTS = ("/v1beta/", "/v1alpha/", "/upload/v1beta/")


def parse_specs(specs: list[str]) -> dict[str, str]:
    """``--upstream`` values: ``URL``, ``anthropic=URL``, ``openai=URL``, ``gemini=URL`` or
    ``/prefix=URL``. ValueError names the bad one."""
    found: dict[str, str] = {}
    for spec in specs:
        key, sep, url = spec.partition("=")
        if not sep or "://" in key:
            key, url = "", spec
        elif key not in ("anthropic", "openai", "gemini") and not key.startswith("/"):
            raise ValueError(
                f"--upstream {spec!r}: give URL, anthropic=URL, openai=URL, gemini=URL or "
                "/prefix=URL"
            )
        if key.startswith(ROUTE_PREFIX) or key.startswith("/_filecache"):
            raise ValueError(f"--upstream {spec!r}: {key} is the gateway's own prefix")
        found[key] = check_upstream(url)
    return found
