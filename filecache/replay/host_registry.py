"""Which host integrations can replay a recorded session, by host name.

Filled by whoever may import the integrations (the CLI: ``register_host_replay``), read by
``replay_host``. Its own module, importing nothing but ``errors``, so registering costs the CLI's
file commands nothing (``tests/core/test_fast_counts.py``): the replay machinery loads only when a
replay runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from filecache.errors import RequestError

if TYPE_CHECKING:
    from pathlib import Path

    from filecache.replay.replay_metrics import SessionReplay

__all__ = ["HOST_REPLAYS", "HostReplay", "host_replay", "register_host_replay"]


class HostReplay(Protocol):
    """A host integration's replay of one imported trace through its hook."""

    def __call__(
        self, trace_dir: Path, *, tokenizer: str = ..., store: str | None = ...
    ) -> SessionReplay: ...


HOST_REPLAYS: dict[str, Callable[[], HostReplay]] = {}
"""Host name -> a loader of its replay function (imported on first use)."""


def register_host_replay(host: str, loader: Callable[[], HostReplay]) -> None:
    """Make ``host_replay(host)`` available (``loader`` imports the integration's replay)."""
    HOST_REPLAYS[host] = loader


def host_replay(host: str) -> HostReplay:
    """The replay function of ``host``.

    Raises:
        RequestError: no replay is registered for it.
    """
    loader = HOST_REPLAYS.get(host)
    if loader is None:
        known = ", ".join(sorted(HOST_REPLAYS)) or "none"
        raise RequestError(f"no replay through the {host!r} integration (known: {known})")
    return loader()
