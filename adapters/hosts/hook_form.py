"""Which hooks ``filecache install claude-code`` writes when neither ``--http`` nor ``--command``
is given: http hooks where that is safe, command hooks elsewhere.

An http hook (``hook_http``) costs Claude Code one loopback request per tool call; a command
hook costs a process start (the thin client of the resident server, ``hook_client``), several
times more (docs/benchmarks.md, "Hooks inside the hosts"). But a port on
127.0.0.1 belongs to whoever listens on it first: while filecache's server is not running (before
the first session after a reboot, after its idle exit), another local user's program can take
the port, and Claude Code then sends it every tool result and takes its answer as the tool's
output. A command hook's Unix socket sits in a folder only this user can enter. So the default is
http only where nobody else can log in to run such a program:

- Linux (the server checks who calls through ``/proc/net/tcp``; it refuses to start elsewhere);
- no other login account in ``/etc/passwd`` (``other_people``: a uid in ``PEOPLE_UIDS`` with a
  login shell, other than the installing user's);
- no account source beyond that file (``/etc/nsswitch.conf``'s ``passwd`` line: ``sss``,
  ``ldap``, ``nis``, ``winbind`` and the like serve accounts the file does not list).

System accounts (below ``PEOPLE_UIDS``, or without a login shell) do not count: they run the
machine's services, not people's programs. In doubt (an unreadable database) the answer is the
command hook.

And a proxy: Claude Code 2.1.332 sends an http hook through the proxy of ``HTTPS_PROXY`` /
``HTTP_PROXY`` (a ``CONNECT 127.0.0.1:PORT`` to it) unless ``NO_PROXY`` names ``127.0.0.1`` (or is
``*``; a CIDR range or ``localhost`` is not matched), so with such a proxy set when installing
(``proxy_in_the_way``) the answer is the command hook too. ``choose`` says which, and why, in
the line install prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "LOCAL_SOURCES",
    "NSSWITCH",
    "PASSWD",
    "PEOPLE_UIDS",
    "choose",
    "default_port",
    "other_people",
    "proxy_in_the_way",
]

PEOPLE_UIDS = range(1000, 60001)
"""The uids of people's accounts (``UID_MIN`` to ``UID_MAX`` of most distributions'
``/etc/login.defs``)."""
LOCAL_SOURCES = frozenset({"files", "compat", "systemd"})
"""``nsswitch.conf`` sources of ``passwd`` read here (``files``, ``compat``: ``PASSWD``) or
holding only services (``systemd``'s dynamic users); any other (``sss``, ``ldap``, ``nis``,
``winbind``, ``extrausers``, ...) counts as others who can log in."""
PASSWD = Path("/etc/passwd")
NSSWITCH = Path("/etc/nsswitch.conf")
_NO_LOGIN = ("nologin", "false", "sync", "shutdown", "halt")


def default_port() -> int:
    """The port of the http hooks when none is given (``--http-port``): fixed per user (41000 +
    uid mod 8000), so installing twice writes the same settings."""
    return 41000 + os.getuid() % 8000


def other_people(uid: int, accounts: Iterable[tuple[str, int, str]],
                 sources: Iterable[str]) -> list[str]:  # fmt: skip
    """What makes this machine shared, for the user ``uid``: the names of other accounts that
    can log in (``accounts``: name, uid, shell, as ``/etc/passwd`` has them), and each account
    source beyond the local files (``sources``: the ``passwd`` line of ``nsswitch.conf``). An
    empty list: only this user can run programs here (beside the system's services)."""
    found = [f"accounts from {source}" for source in sources
             if not source.startswith("[") and source not in LOCAL_SOURCES]  # fmt: skip
    for name, other, shell in accounts:
        login = not shell or not os.path.basename(shell).endswith(_NO_LOGIN)
        if other != uid and other in PEOPLE_UIDS and login and name not in found:
            found.append(name)
    return found


_PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def proxy_in_the_way(env: Mapping[str, str]) -> str | None:
    """The proxy variable of ``env`` through which Claude Code would send an http hook to
    127.0.0.1 (None: it connects directly)."""
    bypass = ",".join(env.get(name, "") for name in ("NO_PROXY", "no_proxy"))
    hosts = {entry.strip() for entry in bypass.split(",")}
    if "*" in hosts or "127.0.0.1" in hosts:
        return None
    return next((name for name in _PROXIES if env.get(name, "").strip()), None)


def _sources(text: str) -> list[str]:
    for line in text.splitlines():
        key, _, rest = line.split("#", 1)[0].partition(":")
        if key.strip() == "passwd":
            return rest.split()
    return ["files"]


def _accounts(text: str) -> list[tuple[str, int, str]]:
    found = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 7 and fields[2].isdigit():
            found.append((fields[0], int(fields[2]), fields[6].strip()))
        elif line.startswith(("+", "-")):  # compat's NIS entries: accounts from elsewhere
            found.append(("NIS accounts (+ in /etc/passwd)", PEOPLE_UIDS[0], ""))
    return found


def choose(env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether install writes http hooks by default on this machine (``PASSWD``,
    ``NSSWITCH``) with the proxy settings of ``env`` (default: this process's), and why (a
    clause for the line install prints)."""
    if not Path("/proc/net/tcp").exists():
        return False, "command hooks: http hooks need Linux"
    proxy = proxy_in_the_way(os.environ if env is None else env)
    if proxy is not None:
        return False, (
            f"command hooks: {proxy} is set, and Claude Code would send http hooks through "
            "that proxy; add 127.0.0.1 to NO_PROXY and install again for http hooks"
        )
    try:
        sources = _sources(NSSWITCH.read_text(errors="replace")) if NSSWITCH.exists() else []
        accounts = _accounts(PASSWD.read_text(errors="replace"))
    except OSError as exc:
        return False, f"command hooks: the accounts of this machine are unknown ({exc.strerror})"
    others = other_people(os.getuid(), accounts, sources or ["files"])
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        return False, (
            f"command hooks: others can log in here ({shown}), and one of them could take an "
            "http hook's port while filecache's server is down; --http if only you use it"
        )
    return True, "http hooks: only you can log in here; --command for command hooks"
