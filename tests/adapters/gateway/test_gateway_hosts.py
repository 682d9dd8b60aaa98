"""Where each host would have sent its requests, and how ``filecache run`` points one process at
the gateway (``hosts.plan``, ``routes``): read from throwaway HOMEs and projects, nothing written.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from filecache.adapters.gateway.hosts import CHATGPT_CODEX, plan
from filecache.adapters.gateway.routes import (
    ANTHROPIC_DEFAULT,
    OPENAI_DEFAULT,
    Route,
    RouteTable,
    api_of,
    parse_specs,
    route_id,
)

from filecache.gateway import Api

GW = "http://127.0.0.1:9/r/abc"


def _home(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


def test_claude_default_variable_and_settings(tmp_path: Path) -> None:
    env = _home(tmp_path)
    chosen = plan("claude", ["-p", "hi"], env, tmp_path)
    assert chosen.upstreams == (ANTHROPIC_DEFAULT,)
    assert chosen.apply([GW]) == ([], {"ANTHROPIC_BASE_URL": GW})
    env["ANTHROPIC_BASE_URL"] = "https://llm.example.com/anthropic"
    assert plan("claude", [], env, tmp_path).upstreams == ("https://llm.example.com/anthropic",)
    settings = tmp_path / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://proxy.example"}}))
    chosen = plan("claude", [], env, tmp_path)
    assert chosen.upstreams == ("https://proxy.example",)  # the settings' env wins, as in Claude
    extra, variables = chosen.apply([GW])
    assert extra == ["--settings", json.dumps({"env": {"ANTHROPIC_BASE_URL": GW}})]
    assert variables == {"ANTHROPIC_BASE_URL": GW}


def test_claude_on_bedrock_runs_without_the_gateway(tmp_path: Path) -> None:
    env = _home(tmp_path) | {"CLAUDE_CODE_USE_BEDROCK": "1"}
    assert "CLAUDE_CODE_USE_BEDROCK" in plan("claude", [], env, tmp_path).unsupported


def test_codex_custom_provider_from_overrides_and_config(tmp_path: Path) -> None:
    env = _home(tmp_path) | {"CODEX_HOME": str(tmp_path / "codex")}
    (tmp_path / "codex").mkdir()
    table = 'model_providers.p={name="p", base_url="http://up.example/v1", wire_api="responses"}'
    chosen = plan("codex", ["exec", "-c", "model_provider=p", "-c", table, "go"], env, tmp_path)
    assert chosen.upstreams == ("http://up.example/v1",) and chosen.after_args
    extra, variables = chosen.apply([GW])
    assert extra == ["-c", f"model_providers.p.base_url={json.dumps(GW)}"] and not variables
    key, _, value = extra[1].partition("=")
    assert tomllib.loads(f"v = {value}")["v"] == GW  # a TOML string Codex parses
    (tmp_path / "codex" / "config.toml").write_text(
        'model_provider = "q"\n[model_providers.q]\nbase_url = "https://q.example/api"\n'
        '[profiles.fast]\nmodel_provider = "r"\n[model_providers.r]\nbase_url = "https://r.example"\n'
    )  # fmt: skip
    assert plan("codex", ["exec", "go"], env, tmp_path).upstreams == ("https://q.example/api",)
    by_profile = plan("codex", ["-p", "fast", "exec", "go"], env, tmp_path)
    assert by_profile.upstreams == ("https://r.example",)
    missing = plan("codex", ["-c", "model_provider=nowhere"], env, tmp_path)
    assert "nowhere" in missing.unsupported


def test_codex_builtin_provider(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    env = _home(tmp_path) | {"CODEX_HOME": str(home)}
    chosen = plan("codex", ["exec", "go"], env, tmp_path)
    assert chosen.upstreams == (OPENAI_DEFAULT,)
    assert chosen.apply([GW]) == (
        ["-c", f"openai_base_url={json.dumps(GW)}"], {"OPENAI_BASE_URL": GW}
    )  # fmt: skip
    (home / "auth.json").write_text(json.dumps({"tokens": {"id_token": "x"}}))
    assert plan("codex", [], env, tmp_path).upstreams == (CHATGPT_CODEX,)  # ChatGPT sign-in
    env["OPENAI_BASE_URL"] = "https://openai.example/v1"
    assert plan("codex", [], env, tmp_path).upstreams == ("https://openai.example/v1",)
    over = plan("codex", ["-c", 'openai_base_url="https://o.example/v1"'], env, tmp_path)
    assert over.upstreams == ("https://o.example/v1",)
    assert plan("codex", ["--oss"], env, tmp_path).unsupported


def test_opencode_providers_from_its_config_files(tmp_path: Path) -> None:
    env = _home(tmp_path)
    config = tmp_path / "home" / ".config" / "opencode"
    config.mkdir(parents=True)
    (config / "opencode.jsonc").write_text(
        '{\n  // the user\'s providers\n  "provider": {\n    "local": {"npm": '
        '"@ai-sdk/openai-compatible", "options": {"baseURL": "http://127.0.0.1:1234/v1"}},\n'
        '    "google": {"options": {"baseURL": "https://g.example"}},\n  },\n}\n'
    )  # fmt: skip
    project = tmp_path / "project"
    project.mkdir()
    (project / "opencode.json").write_text(json.dumps(
        {"provider": {"anthropic": {"options": {"baseURL": "https://a.example/v1"}}}}
    ))  # fmt: skip
    env["OPENCODE_CONFIG_CONTENT"] = json.dumps({"model": "local/m"})
    chosen = plan("opencode", ["run", "x"], env, project)
    assert chosen.upstreams == (
        "https://a.example/v1",
        "http://127.0.0.1:1234/v1",
        "https://api.openai.com/v1",
    )  # fmt: skip  (anthropic, local, openai: sorted by name; google is no API it reads)
    _, variables = chosen.apply(["u1", "u2", "u3"])
    content = json.loads(variables["OPENCODE_CONFIG_CONTENT"])
    assert content["model"] == "local/m"  # the user's own inline config is kept
    assert content["provider"] == {
        "anthropic": {"options": {"baseURL": "u1"}},
        "local": {"options": {"baseURL": "u2"}},
        "openai": {"options": {"baseURL": "u3"}},
    }


def test_kilo_providers_from_its_own_config_files(tmp_path: Path) -> None:
    """Kilo reads ~/.config/kilo, a project's kilo.json and .kilo/.kilocode folders, never
    opencode's folders; the route goes in KILO_CONFIG_CONTENT (yours kept)."""
    from filecache.adapters.gateway.hosts import KILO
    from filecache.adapters.hosts.kilo import PROJECT_FILES, USER_FILES

    assert KILO.user_files == USER_FILES
    assert {f"{d}/{n}" for d in KILO.project_folders for n in KILO.folder_files} == set(
        PROJECT_FILES
    )
    env = _home(tmp_path)
    user = tmp_path / "home" / ".config"
    (user / "kilo").mkdir(parents=True)
    (user / "opencode").mkdir(parents=True)
    (user / "kilo" / "kilo.jsonc").write_text(
        '{\n  // mine\n  "provider": {"local": {"npm": "@ai-sdk/openai-compatible",\n'
        '    "options": {"baseURL": "http://127.0.0.1:1234/v1"}},},\n}\n'
    )  # fmt: skip
    (user / "opencode" / "opencode.json").write_text(json.dumps(
        {"provider": {"anthropic": {"options": {"baseURL": "https://opencode-only.example"}}}}
    ))  # fmt: skip
    project = tmp_path / "project"
    (project / ".kilocode").mkdir(parents=True)
    (project / ".kilocode" / "kilo.json").write_text(json.dumps(
        {"provider": {"openai": {"options": {"baseURL": "https://o.example/v1"}}}}
    ))  # fmt: skip
    (project / "kilo.json").write_text(json.dumps(
        {"provider": {"openai": {"options": {"baseURL": "https://overridden.example/v1"}}}}
    ))  # fmt: skip
    env["KILO_CONFIG_CONTENT"] = json.dumps({"model": "local/m", "share": "disabled"})
    chosen = plan("kilo", ["run", "--auto", "x"], env, project)
    assert chosen.upstreams == (
        "https://api.anthropic.com/v1",  # opencode's own files do not reach Kilo
        "http://127.0.0.1:1234/v1",
        "https://o.example/v1",  # a project folder's file over the project's root file
    )  # fmt: skip
    extra, variables = chosen.apply(["u1", "u2", "u3"])
    assert extra == [] and set(variables) == {"KILO_CONFIG_CONTENT"}
    content = json.loads(variables["KILO_CONFIG_CONTENT"])
    assert (content["model"], content["share"]) == ("local/m", "disabled")
    assert content["provider"] == {
        "anthropic": {"options": {"baseURL": "u1"}},
        "local": {"options": {"baseURL": "u2"}},
        "openai": {"options": {"baseURL": "u3"}},
    }


@pytest.mark.parametrize(
    ("upstream", "rest", "api"),
    [
        ("https://api.anthropic.com", "/v1/messages", Api.ANTHROPIC_MESSAGES),
        ("https://api.anthropic.com/v1", "/messages", Api.ANTHROPIC_MESSAGES),  # opencode's
        ("https://llm.example/anthropic", "/v1/messages?beta=true", Api.ANTHROPIC_MESSAGES),
        ("https://api.anthropic.com", "/v1/messages/count_tokens", None),
        ("https://api.openai.com/v1", "/responses", Api.OPENAI_RESPONSES),
        ("https://openrouter.ai/api/v1", "/chat/completions", Api.OPENAI_CHAT),
        ("https://api.openai.com/v1", "/models", None),
    ],
)
def test_the_api_of_a_forwarded_path(upstream: str, rest: str, api: Api | None) -> None:
    assert api_of(upstream, rest) == api


def test_routes(tmp_path: Path) -> None:
    table = RouteTable(parse_specs(["/a=http://a.example/x/", "openai=https://o.example/v1"]), {})
    assert table.resolve("/a/v1/messages") == (Route("/a", "http://a.example/x"), "/v1/messages")
    assert table.resolve("/v1/messages") == (Route("", ANTHROPIC_DEFAULT), "/v1/messages")
    assert table.resolve("/responses") == (Route("", "https://o.example/v1"), "/responses")
    default = RouteTable({}, {"OPENAI_BASE_URL": "https://proxy.example/openai/v1"})
    assert default.resolve("/v1/models") == (Route("", "https://proxy.example"), "/v1/models")
    ident = route_id("http://u.example", 2000)
    assert ident == route_id("http://u.example", 2000) != route_id("http://u.example", None)
    assert table.resolve(f"/r/{ident}/v1/messages") is None  # not registered (yet)
    table.register({ident: Route(f"/r/{ident}", "http://u.example", 2000)})
    assert table.resolve(f"/r/{ident}/v1/messages") == (
        Route(f"/r/{ident}", "http://u.example", 2000), "/v1/messages"
    )  # fmt: skip
    for bad in ("ftp://x", "a=http://x", "/r/x=http://x", "http://x/?q=1"):
        with pytest.raises(ValueError):
            parse_specs([bad])


def test_run_takes_the_host_tables_programs_and_each_has_a_plan(tmp_path: Path) -> None:
    """``filecache run``'s choices are derived from HostSpec.run; every one has a planner, and a
    program outside the table is refused by name."""
    from filecache.adapters.gateway.hosts import HOSTS, PLANNERS
    from filecache.adapters.hosts.host_specs import SPECS

    assert HOSTS == tuple(s.run for s in SPECS if s.run)
    assert HOSTS == ("claude", "codex", "opencode", "gemini", "kilo")
    assert set(PLANNERS) == set(HOSTS)
    with pytest.raises(ValueError, match="no plan for 'aider'"):
        plan("aider", [], _home(tmp_path), tmp_path)
