"""One settings object, documented in one place.

Precedence, lowest first: the defaults below; a ``[tool.filecache]`` table in the root's
``pyproject.toml``; environment variables ``FILECACHE_<NAME>`` (upper case); keyword arguments to
``FileCache``. Unknown names and bad values raise ``ConfigError``. A repository's table may
narrow but never reach outside it: its ``key_file``, and a ``store`` that is a URL or a path
outside the root, are ignored with a warning (once per process); its relative ``store`` is the
root's. The environment and arguments (the user's own) are not limited.

- ``store`` (None): SQLite path, ``":memory:"`` or a ``postgresql://`` URL (a store shared by a
  fleet; needs the ``[postgres]`` extra); None means ``<root>/.filecache/cache.db``. Any other
  ``scheme://`` is refused, never taken as a file name.
- ``session`` (None): the session id the CLI uses (``FILECACHE_SESSION``).
- ``deny`` (``DEFAULT_DENY``: ``.env*``, ``*.pem``, ``*.key``, ``*.p12``, ``*.pfx``, the
  private keys ssh-keygen and common tools write — ``id_rsa*``, ``id_dsa*``, ``id_ecdsa*``,
  ``id_ed25519*`` (``_sk`` too), ``id_xmss*``, ``*_rsa``, ``*_dsa``, ``*_ecdsa``,
  ``*_ed25519``, ``*_key``, ``deploy_key*``, ``*.ppk`` — and ``.netrc``, ``.pgpass``,
  ``*.jks``, ``*.keystore``): files hashed but whose content is never stored in any form
  (globs matched case-insensitively on the name and on the relative path, of the path asked
  for and of a symbolic link's target; comma-separated in env). The model is still shown what
  it reads; see ``Secrets.denied``. Denied too: a file that is a denied file under another
  name (a hard link: same device and inode), a version or a tool's output that holds a denied
  file's lines, and content holding a private key's header, whatever its name
  (``filecache.secrecy``).
- ``key_file`` (None): a file for the key of denied files' versions (a keyed BLAKE2b, so no
  stored hash gives a low-entropy secret back) and of the raw-answer seal; None (the default)
  derives it from the key of sealed store rows (``FILECACHE_KEY``, else
  ``$XDG_CONFIG_HOME/filecache/key``), as does a set ``FILECACHE_KEY``. Made on first use, mode
  0600; refused inside the root.
- ``retention_days`` (30): sessions unused this long are garbage-collected.
- ``max_file_bytes`` (4 MiB): whole reads of larger files are refused (use offset/limit).
- ``diff_max_ratio`` (0.6): a diff is sent only if its tokens are at most this fraction of the
  content's; a diff that saves less than 40% is not worth making the model apply it. Values
  over 1 send diffs even when larger than the content (tests use this to exercise diffs).
- ``versions_per_path`` (4): model-held versions remembered per path.
- ``tokenizer`` (``o200k``): ``o200k``, ``cl100k`` (exact BPE, offline) or ``estimate``.
- ``exact_counts`` (False): count every answer's tokens exactly with ``tokenizer`` on the read
  path. Off, the read path (answers, their ``tokens``/``tokens_full``, the ledger) uses
  ``tokens.fast_estimate`` — no vocabulary is loaded (~250 ms once per process for o200k) and
  no new version is rendered and counted (~3 ms for 10,000 lines); a FileRef, diff or outline
  replaces content only when it is smaller by ``tokens.ESTIMATE_MARGIN`` more. Pruning and
  outline budgets always count exactly.
- ``memory_mb`` (64): memory for decoded versions kept in a cache's LRU (what diffs are made
  from without a store read), in MiB as ``sys.getsizeof`` counts it. Versions that leave it are
  compressed into the store by a background thread. At least one version is always kept.
- ``outline_threshold`` (6000): ``mode="auto"`` answers an outline above this many tokens.
- ``mcp_ref_calls`` (50), ``mcp_ref_minutes`` (30): the MCP server and middleware cannot see
  the client's context, so a result backs FileRefs and diffs only for this many later tool
  calls of its connection and this many minutes; then its lines are sent again. 0: always
  send content.
- ``watch`` (False): watch the root for files changed outside the agent (``filecache.watch``);
  the next answer to a session that holds such a file starts with a notice and the diff.
- ``watch_debounce`` (0.2): seconds of quiet that end a burst of file events.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from filecache.errors import ConfigError

__all__ = ["Settings", "deny_pattern", "is_denied", "load_settings"]

DEFAULT_DENY = (
    ".env*", "*.pem", "*.key", "id_rsa*", "*.p12", "*.pfx",
    "id_dsa*", "id_ecdsa*", "id_ed25519*", "id_xmss*",
    "*_rsa", "*_dsa", "*_ecdsa", "*_ed25519", "*_key", "deploy_key*", "*.ppk",
    ".netrc", ".pgpass", "*.jks", "*.keystore",
)  # fmt: skip
"""The default deny-list (besides it, content holding a private key is denied whatever its
name: ``secrecy.holds_private_key``)."""


@dataclass(frozen=True)
class Settings:
    """Every setting filecache reads; see the module docstring for meanings and defaults."""

    store: str | None = None
    session: str | None = None
    deny: tuple[str, ...] = DEFAULT_DENY
    key_file: str | None = None
    retention_days: float = 30.0
    max_file_bytes: int = 4 * 1024 * 1024
    diff_max_ratio: float = 0.6
    versions_per_path: int = 4
    tokenizer: str = "o200k"
    exact_counts: bool = False
    memory_mb: float = 64.0
    outline_threshold: int = 6000
    mcp_ref_calls: int = 50
    mcp_ref_minutes: float = 30.0
    watch: bool = False
    watch_debounce: float = 0.2

    def __post_init__(self) -> None:
        if self.max_file_bytes <= 0:
            raise ConfigError("max_file_bytes must be positive")
        if not self.diff_max_ratio > 0:
            raise ConfigError("diff_max_ratio must be positive")
        if self.versions_per_path < 1:
            raise ConfigError("versions_per_path must be at least 1")
        if self.retention_days <= 0:
            raise ConfigError("retention_days must be positive")
        if not self.memory_mb > 0:
            raise ConfigError("memory_mb must be positive")
        if self.outline_threshold < 0:
            raise ConfigError("outline_threshold must be >= 0")
        if self.mcp_ref_calls < 0 or self.mcp_ref_minutes < 0:
            raise ConfigError("mcp_ref_calls and mcp_ref_minutes must be >= 0")
        if not self.watch_debounce >= 0:
            raise ConfigError("watch_debounce must be >= 0")


def is_denied(path: str, deny: tuple[str, ...]) -> bool:
    """Whether ``path`` (relative, POSIX) or its file name matches a deny-list glob, ignoring
    case (``.ENV``, ``X.PEM`` and ``ID_RSA`` are as secret as their lower-case names)."""
    return deny_pattern(deny).match(path.lower()) is not None


@functools.lru_cache(maxsize=64)
def deny_pattern(deny: tuple[str, ...]) -> re.Pattern[str]:
    """The deny-list as one regular expression: ``is_denied(path, deny)`` is
    ``deny_pattern(deny).match(path.lower())``. Compiled once per list (a prune pass or a walk
    matches many names with it, with no glob translated or list lowered per name).

    The globs (lower-cased, ``fnmatch.translate``: each matches a whole string) are tried on
    the path without one leading ``./`` (the possessive group cannot give it back) and, after
    the path's last ``/`` (the negative look-ahead: no ``/`` after it), on its file name.
    """
    if not deny:
        return re.compile(r"(?!)")  # matches nothing
    globs = "|".join(fnmatch.translate(p.lower()) for p in deny)
    return re.compile(rf"(?:\./)?+(?:.*/(?!.*/))?(?:{globs})", re.DOTALL)


_FIELDS = {f.name: f for f in fields(Settings)}
_BOOLEAN = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False}
_BOOLEAN |= {"no": False, "off": False, "": False}


def _coerce(name: str, value: Any, source: str) -> Any:
    kind = _FIELDS[name].type
    try:
        if name == "deny":
            if isinstance(value, str):
                return tuple(p.strip() for p in value.split(",") if p.strip())
            return tuple(str(p) for p in value)
        if value is None:
            return None
        if kind == "bool":
            if isinstance(value, str):
                return _BOOLEAN[value.strip().lower()]
            return bool(value)
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        return str(value)
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(f"{source}: bad value for {name}: {value!r} ({exc})") from exc


def _from_pyproject(root: Path) -> dict[str, Any]:
    path = root / "pyproject.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read [tool.filecache] ({exc})") from exc
    if "filecache" not in text:
        return {}  # no [tool.filecache] table: skip the parser (and its import) on every start
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: cannot read [tool.filecache] ({exc})") from exc
    table = data.get("tool", {}).get("filecache", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.filecache] must be a table")
    return _confined(root, path, {k.replace("-", "_"): v for k, v in table.items()})


_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")  # store_url's schemes, collapsed too
_REFUSED: set[str] = set()


def _confined(root: Path, path: Path, table: dict[str, Any]) -> dict[str, Any]:
    """A repository's own settings, which may narrow but never reach outside it: ``key_file``
    is refused (a repository would make 32 bytes at any path it names), and so is a ``store``
    that is a URL (a server of the author's) or a path outside the root (a folder others may
    read); a relative ``store`` is the root's. Each refusal is said once per process (a
    warning); the user's own configuration and ``FILECACHE_*`` are not limited."""
    out = dict(table)
    if "key_file" in out:
        del out["key_file"]
        _refuse(f"{path}: key_file is ignored; a repository may not name a key file (set "
                "FILECACHE_KEY_FILE in your own environment)")  # fmt: skip
    store = out.get("store")
    if isinstance(store, str) and store and store != ":memory:":
        if _URL_LIKE.match(store):
            del out["store"]
            _refuse(f"{path}: store {store!r} is ignored; a repository may not send its reads "
                    "to a server (set FILECACHE_STORE in your own environment)")  # fmt: skip
        else:
            full = os.path.join(root, store)
            real, top = os.path.realpath(full), os.path.realpath(root)
            if os.path.commonpath([real, top]) != top:
                del out["store"]
                _refuse(f"{path}: store {store!r} is ignored; a repository may not keep "
                        "its store outside itself (set FILECACHE_STORE yourself)")  # fmt: skip
            else:
                out["store"] = full
    return out


def _refuse(message: str) -> None:
    if message in _REFUSED:
        return
    _REFUSED.add(message)
    import logging  # on first use

    logging.getLogger("filecache").warning("filecache: %s", message)


def load_settings(
    root: Path, overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Settings for ``root``: defaults < pyproject < environment < ``overrides``."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    layers: list[tuple[str, Mapping[str, Any]]] = [
        (f"{root / 'pyproject.toml'} [tool.filecache]", _from_pyproject(root)),
        (
            "environment",
            {n: env[f"FILECACHE_{n.upper()}"] for n in _FIELDS if f"FILECACHE_{n.upper()}" in env},
        ),
        ("arguments", dict(overrides or {})),
    ]
    for source, layer in layers:
        for name, value in layer.items():
            if name not in _FIELDS:
                known = ", ".join(sorted(_FIELDS))
                raise ConfigError(f"{source}: unknown setting {name!r}; known: {known}")
            values[name] = _coerce(name, value, source)
    return replace(Settings(), **values)
