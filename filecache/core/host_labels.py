"""The names users know the hosts by, for the reports (``stats.host_of``).

The hosts themselves are a table of the adapters (``filecache.adapters.hosts.host_specs``),
above every layer that reports on their sessions; whoever may import both (the CLI) registers
each host here. Its own module, importing nothing, so registering costs a file command nothing
(``tests/core/test_fast_counts.py``).
"""

from __future__ import annotations

__all__ = ["HOST_LABELS", "register_host"]

HOST_LABELS: dict[str, str] = {}
"""Host name (the prefix of its sessions' ids, ``HOST:<host session id>@<root hash>``) -> the
name a user knows it by."""


def register_host(name: str, label: str) -> None:
    """Name host ``name``'s sessions ``label`` in the reports."""
    HOST_LABELS[name] = label
