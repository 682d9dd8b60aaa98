"""How each host is pointed at the gateway for one process, and what it would have used instead.

``plan(host, args, env, cwd)`` reads (never writes) the host's own settings to find the upstream
the host would have called, and returns how to point this one process at a gateway route for it:
extra arguments and environment variables, nothing persisted.

- Claude Code: ``ANTHROPIC_BASE_URL`` (the variable, or the ``env`` of its settings files, which
  Claude Code applies over the process's own: then the route also goes in a ``--settings`` JSON
  argument, which ranks above the user's and the project's settings files). Bedrock, Vertex and
  Foundry are not the Messages API at a base URL: those run without the gateway.
- Codex: the provider in use (``model_provider``: ``-c`` overrides, the profile, config.toml;
  ``openai`` by default) and its ``base_url``; a custom provider is re-pointed with
  ``-c model_providers.ID.base_url=...``, the built-in one with ``-c openai_base_url=...`` (the
  built-in's upstream: ``openai_base_url``, else ``OPENAI_BASE_URL``, else ChatGPT's Codex
  backend when it is signed in with ChatGPT, else ``https://api.openai.com/v1``).
- opencode: ``OPENCODE_CONFIG_CONTENT`` (opencode merges it over every config file) gives each
  provider that speaks a known API (``anthropic``, ``openai``, and ``@ai-sdk/anthropic``,
  ``@ai-sdk/openai``, ``@ai-sdk/openai-compatible`` entries with a base URL) its route as
  ``options.baseURL``.
- Kilo CLI (an opencode fork): the same, from Kilo's own files (``~/.config/kilo``, a project's
  ``kilo.json``/``opencode.json`` and ``.kilo``/``.kilocode`` folders, ``KILO_CONFIG``,
  ``KILO_CONFIG_DIR``) through ``KILO_CONFIG_CONTENT``, which Kilo merges over all of them. Its
  own Kilo Gateway provider (``kilo``, ``api.kilo.ai``) is not re-pointed: it goes direct.
- Gemini CLI: ``GOOGLE_GEMINI_BASE_URL`` (the variable, else the one line of it in the ``.env``
  file Gemini CLI loads, which never overrides the process's own variable), with API-key auth
  (``security.auth.selectedType`` ``gemini-api-key`` or ``gateway`` in its settings files, or
  none and a base URL already set: Gemini CLI's "gateway" auth either way): a Google login
  (Code Assist) and Vertex AI are other APIs and run without the gateway.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filecache.adapters.gateway.routes import ANTHROPIC_DEFAULT, GEMINI_DEFAULT, OPENAI_DEFAULT
from filecache.adapters.hosts.host_specs import RUN_NAMES

__all__ = ["HOSTS", "HostPlan", "plan"]

HOSTS = RUN_NAMES  # the programs of the host table (HostSpec.run); each has a planner below
CHATGPT_CODEX = "https://chatgpt.com/backend-api/codex"
OPENCODE_DEFAULTS = {
    "anthropic": "https://api.anthropic.com/v1",
    "openai": "https://api.openai.com/v1",
}
_OPENCODE_NPM = ("@ai-sdk/anthropic", "@ai-sdk/openai", "@ai-sdk/openai-compatible")

Apply = Callable[[Sequence[str]], tuple[list[str], dict[str, str]]]


@dataclass(frozen=True)
class HostPlan:
    """``upstreams``: the original base URLs to register, in order; ``apply``: the route URLs
    (same order) → (the arguments to put before the user's, the variables to set);
    ``unsupported``: why this process cannot go through the gateway ("" when it can)."""

    upstreams: tuple[str, ...]
    apply: Apply
    unsupported: str = ""
    after_args: bool = False  # the extra arguments go after the user's (Codex's -c overrides)


def plan(host: str, args: Sequence[str], env: Mapping[str, str], cwd: Path) -> HostPlan:
    """The plan for ``host`` (one of ``HOSTS``) run with ``args`` in ``cwd`` under ``env``.

    Raises:
        ValueError: ``host`` is not one of ``HOSTS``.
    """
    if host not in PLANNERS:
        raise ValueError(f"filecache run has no plan for {host!r}; use one of {', '.join(HOSTS)}")
    return PLANNERS[host](args, env, cwd)


def _nothing(urls: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    return [], {}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# -- Claude Code ---------------------------------------------------------------------------------


def _claude(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> HostPlan:
    config = Path(env.get("CLAUDE_CONFIG_DIR") or Path(env.get("HOME") or "~") / ".claude")
    files = [
        config.expanduser() / "settings.json",
        cwd / ".claude" / "settings.json",
        cwd / ".claude" / "settings.local.json",
    ]
    merged = dict(env)
    from_settings = False
    for path in files:
        settings_env = _read_json(path).get("env")
        if isinstance(settings_env, dict):
            for key, value in settings_env.items():
                merged[str(key)] = str(value)
                from_settings |= key == "ANTHROPIC_BASE_URL"
    for flag in ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"):
        if merged.get(flag, "").strip().lower() not in ("", "0", "false"):
            return HostPlan((), _nothing, f"{flag} is set (not the Messages API at a base URL)")
    upstream = merged.get("ANTHROPIC_BASE_URL") or ANTHROPIC_DEFAULT

    def apply(urls: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        extra = ["--settings", json.dumps({"env": {"ANTHROPIC_BASE_URL": urls[0]}})]
        return (extra if from_settings else []), {"ANTHROPIC_BASE_URL": urls[0]}

    return HostPlan((upstream,), apply)


# -- Codex ---------------------------------------------------------------------------------------


def _toml_value(text: str) -> Any:
    """A ``-c key=value`` value as Codex reads it: TOML, else the literal string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _set_dotted(into: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        nxt = into.get(part)
        if not isinstance(nxt, dict):
            nxt = into[part] = {}
        into = nxt
    into[parts[-1]] = value


def _codex_overrides(args: Sequence[str]) -> tuple[dict[str, Any], str | None]:
    """The ``-c``/``--config`` overrides among Codex's arguments, and ``--profile``/``-p``."""
    found: dict[str, Any] = {}
    profile = None
    items = list(args)
    for i, arg in enumerate(items):
        value = None
        if arg in ("-c", "--config") and i + 1 < len(items):
            value = items[i + 1]
        elif arg.startswith("--config="):
            value = arg.split("=", 1)[1]
        elif arg in ("-p", "--profile") and i + 1 < len(items):
            profile = items[i + 1]
        elif arg.startswith("--profile="):
            profile = arg.split("=", 1)[1]
        if value is not None and "=" in value:
            key, _, raw = value.partition("=")
            _set_dotted(found, key.strip(), _toml_value(raw.strip()))
    return found, profile


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _codex(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> HostPlan:
    home = Path(env.get("CODEX_HOME") or Path(env.get("HOME") or "~") / ".codex").expanduser()
    try:
        config: dict[str, Any] = tomllib.loads((home / "config.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        config = {}
    overrides, profile = _codex_overrides(args)
    profile = profile or overrides.get("profile") or config.get("profile")
    profiles = config.get("profiles")
    if isinstance(profile, str) and isinstance(profiles, dict):
        chosen = profiles.get(profile)
        if isinstance(chosen, dict):
            config = _merge(config, chosen)
    config = _merge(config, overrides)
    if "--oss" in args:
        return HostPlan((), _nothing, "--oss (a local model server)")
    provider = str(config.get("model_provider") or "openai")
    if provider == "openai":
        upstream = str(
            config.get("openai_base_url")
            or env.get("OPENAI_BASE_URL")
            or (CHATGPT_CODEX if _chatgpt_login(home, env) else OPENAI_DEFAULT)
        )

        def apply_builtin(urls: Sequence[str]) -> tuple[list[str], dict[str, str]]:
            return ["-c", f"openai_base_url={json.dumps(urls[0])}"], {"OPENAI_BASE_URL": urls[0]}

        return HostPlan((upstream,), apply_builtin, after_args=True)
    table = (config.get("model_providers") or {}).get(provider)
    base_url = table.get("base_url") if isinstance(table, dict) else None
    if not isinstance(base_url, str) or not base_url:
        return HostPlan((), _nothing, f"model provider {provider!r} has no base_url")

    def apply_custom(urls: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        return ["-c", f"model_providers.{provider}.base_url={json.dumps(urls[0])}"], {}

    return HostPlan((base_url,), apply_custom, after_args=True)


def _chatgpt_login(home: Path, env: Mapping[str, str]) -> bool:
    """Codex signed in with ChatGPT (its requests then go to ChatGPT's Codex backend)."""
    auth = _read_json(home / "auth.json")
    if auth.get("OPENAI_API_KEY") or env.get("OPENAI_API_KEY") or env.get("CODEX_API_KEY"):
        return False
    return isinstance(auth.get("tokens"), dict)


# -- opencode ------------------------------------------------------------------------------------


def _jsonc(path: Path) -> dict[str, Any]:
    """An opencode config file (JSON, or JSONC with // comments and trailing commas)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        data = _loose_json(text)
    return data if isinstance(data, dict) else {}


def _loose_json(text: str) -> Any:
    import re

    out, i, in_string = [], 0, False
    while i < len(text):  # drop comments outside strings
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
            continue
        else:
            out.append(ch)
        i += 1
    try:
        return json.loads(re.sub(r",(\s*[}\]])", r"\1", "".join(out)))
    except ValueError:
        return {}


@dataclass(frozen=True)
class _Family:
    """Where a host of the opencode family reads its configuration: the user's files (in a
    folder of ``$XDG_CONFIG_HOME``, merged in order), ``<VARIABLE>_CONFIG`` (a file) and
    ``<VARIABLE>_CONFIG_CONTENT`` (JSON, merged over every file), a project's files from the
    outermost folder in, and its config folders."""

    folder: str
    user_files: tuple[str, ...]
    variable: str
    project_files: tuple[str, ...]
    project_folders: tuple[str, ...]
    folder_files: tuple[str, ...]

    @property
    def content(self) -> str:
        return f"{self.variable}_CONFIG_CONTENT"


OPENCODE = _Family(
    "opencode", ("config.json", "opencode.json", "opencode.jsonc"), "OPENCODE",
    ("opencode.json", "opencode.jsonc"), (".opencode",), ("opencode.json", "opencode.jsonc"),
)  # fmt: skip
KILO = _Family(  # read from Kilo 7.7.7's binary (docs/kilo.md); kilo.USER_FILES is the same list
    "kilo", ("config.json", "kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc"), "KILO",
    ("kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc"), (".kilocode", ".kilo"),
    ("kilo.jsonc", "kilo.json", "opencode.jsonc", "opencode.json"),
)  # fmt: skip


def _opencode_config(env: Mapping[str, str], cwd: Path, family: _Family) -> dict[str, Any]:
    home = Path(env.get("HOME") or "~").expanduser()
    config_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / family.folder
    files = [config_home / name for name in family.user_files]
    if env.get(f"{family.variable}_CONFIG"):
        files.append(Path(env[f"{family.variable}_CONFIG"]))
    outermost_first = [*reversed([cwd, *cwd.parents])]
    files += [folder / name for folder in outermost_first for name in family.project_files]
    for folder in outermost_first:
        for sub in family.project_folders:
            files += [folder / sub / name for name in family.folder_files]
    if env.get(f"{family.variable}_CONFIG_DIR"):
        files += [Path(env[f"{family.variable}_CONFIG_DIR"]) / n for n in family.folder_files]
    merged: dict[str, Any] = {}
    for path in files:
        merged = _merge(merged, _jsonc(path))
    if env.get(family.content):
        try:
            inline = json.loads(env[family.content])
        except ValueError:
            inline = {}
        merged = _merge(merged, inline if isinstance(inline, dict) else {})
    return merged


def _opencode_family(
    args: Sequence[str], env: Mapping[str, str], cwd: Path, family: _Family
) -> HostPlan:
    config = _opencode_config(env, cwd, family)
    providers = config.get("provider") if isinstance(config.get("provider"), dict) else {}
    chosen: dict[str, str] = dict(OPENCODE_DEFAULTS)
    for name, entry in (providers or {}).items():
        if not isinstance(entry, dict):
            continue
        options = entry.get("options") if isinstance(entry.get("options"), dict) else {}
        base = (options or {}).get("baseURL")
        npm = entry.get("npm")
        if isinstance(base, str) and base and (npm in _OPENCODE_NPM or name in chosen):
            chosen[str(name)] = base
    names = sorted(chosen)
    inline_text = env.get(family.content)
    try:
        inline = json.loads(inline_text) if inline_text else {}
    except ValueError:
        inline = {}

    def apply(urls: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        routed = {
            name: {"options": {"baseURL": url}} for name, url in zip(names, urls, strict=True)
        }
        content = _merge(inline if isinstance(inline, dict) else {}, {"provider": routed})
        return [], {family.content: json.dumps(content)}

    return HostPlan(tuple(chosen[name] for name in names), apply)


def _opencode(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> HostPlan:
    return _opencode_family(args, env, cwd, OPENCODE)


def _kilo(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> HostPlan:
    return _opencode_family(args, env, cwd, KILO)


# -- Gemini CLI ----------------------------------------------------------------------------------

GEMINI_BASE = "GOOGLE_GEMINI_BASE_URL"
_GEMINI_AUTH = ("gemini-api-key", "gateway")  # the Gemini API at a base URL


def _gemini_settings(env: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    """Gemini CLI's settings merged as it merges them: the user's, the workspace's, the
    system's (which overrides both)."""
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or "~").expanduser()
    system = env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or "/etc/gemini-cli/settings.json"
    merged: dict[str, Any] = {}
    for path in (home / ".gemini" / "settings.json", cwd / ".gemini" / "settings.json",
                 Path(system)):  # fmt: skip
        merged = _merge(merged, _jsonc(path))
    return merged


def _env_file_value(env: Mapping[str, str], cwd: Path, key: str) -> str | None:
    """``key`` from the ``.env`` file Gemini CLI loads (``.gemini/.env`` or ``.env`` in the
    folder or the nearest parent, else ``~/.gemini/.env``, ``~/.env``): that one line only,
    read and forgotten (nothing of the file is kept or logged)."""
    home = Path(env.get("HOME") or "~").expanduser()
    found = None
    for folder in [cwd, *cwd.parents]:
        for path in (folder / ".gemini" / ".env", folder / ".env"):
            if path.is_file():
                found = path
                break
        if found is not None:
            break
    if found is None:
        found = next((p for p in (home / ".gemini" / ".env", home / ".env") if p.is_file()), None)
    try:
        rows = found.read_text(encoding="utf-8").splitlines() if found is not None else []
    except (OSError, UnicodeDecodeError):
        return None
    for row in rows:
        name, sep, value = row.strip().removeprefix("export ").partition("=")
        if sep and name.strip() == key:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            return value or None
    return None


def _gemini(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> HostPlan:
    settings = _gemini_settings(env, cwd)
    security = settings.get("security") if isinstance(settings.get("security"), dict) else {}
    auth = (security or {}).get("auth")
    selected = auth.get("selectedType") if isinstance(auth, dict) else None

    def variable(name: str) -> str | None:  # the process's own wins over its .env file
        return env.get(name) or _env_file_value(env, cwd, name)

    given = variable(GEMINI_BASE)
    if selected is None:  # Gemini CLI picks its auth from the environment
        other = [n for n in ("GOOGLE_GENAI_USE_GCA", "GOOGLE_GENAI_USE_VERTEXAI")
                 if variable(n) == "true"]  # fmt: skip
        if other:
            return HostPlan((), _nothing, f"{other[0]} is set (not the Gemini API)")
        if not given:  # its base URL would turn gemini-api-key auth into "gateway" auth
            return HostPlan((), _nothing, "set security.auth.selectedType to gemini-api-key")
    elif selected not in _GEMINI_AUTH:
        return HostPlan((), _nothing, f"auth {selected!r} (the gateway serves gemini-api-key)")
    upstream = given or GEMINI_DEFAULT

    def apply(urls: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        return [], {GEMINI_BASE: urls[0]}

    return HostPlan((upstream,), apply)


Planner = Callable[[Sequence[str], Mapping[str, str], Path], HostPlan]
PLANNERS: Mapping[str, Planner] = {
    "claude": _claude,
    "codex": _codex,
    "opencode": _opencode,
    "gemini": _gemini,
    "kilo": _kilo,
}
"""How each program of ``HOSTS`` is pointed at the gateway (tests/adapters/gateway/
test_gateway_hosts.py checks the two lists agree)."""
