"""filecache's own tools for an agent loop: schemas, dispatch, errors as tool results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from filecache import FileCache
from filecache.prune.pruner import prune_messages
from filecache.prune.pruning import PrunePolicy
from filecache.tools import (
    FILE_TOOL_SPECS,
    READ_FILE,
    TOOL_SPECS,
    check_arguments,
    param_help,
    run_tool,
    schemas,
    tool_spec,
)

TEXT = "".join(f"def handler_{i}(event):\n    return compute({i}, event)\n\n" for i in range(40))


@pytest.mark.parametrize("style", ["openai", "responses", "anthropic"])
def test_schemas_name_the_three_tools_and_carry_the_instructions(style: str) -> None:
    tools = schemas(style)
    names = [t.get("name") or t["function"]["name"] for t in tools]
    assert names == ["read_file", "write_file", "edit_file"]
    blob = json.dumps(tools)
    assert "fresh=true" in blob and "unchanged" in blob


def test_run_tool_reads_edits_and_reports_errors(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(TEXT)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        first = run_tool(session, "read_file", '{"path": "app.py"}', "c1")
        assert not first.is_error and first.text.startswith("[app.py: 120 lines")
        again = run_tool(session, "read_file", {"path": "app.py"}, "c2")
        assert "unchanged since your result c1" in again.text
        edit = {"path": "app.py", "old_string": "compute(7,", "new_string": "compute(70,"}
        assert not run_tool(session, "edit_file", edit, "c3").is_error
        symbol = run_tool(session, "read_file", {"path": "app.py", "symbol": "handler_7"}, "c4")
        # the model holds these two lines from its edit, and a one-line FileRef costs less
        assert symbol.text.startswith("[filecache] app.py unchanged since your result c3 (lines")
        assert "(lines 22-23, " in symbol.text and symbol.text.count("\n") == 1
        args = {"path": "app.py", "symbol": "handler_7", "fresh": True}
        symbol = run_tool(session, "read_file", args, "c5")
        assert symbol.text.startswith("[app.py: handler_7, lines 22-23 of 120")
        assert "compute(70, event)" in symbol.text
        for name, args in [
            ("read_file", {"path": "../outside.txt"}),
            ("read_file", {"path": "missing.py"}),
            ("read_file", {"path": "app.py", "offset": "ten"}),
            ("read_file", "{not json"),
            ("edit_file", {"path": "app.py", "old_string": "nope", "new_string": "x"}),
            ("delete_file", {"path": "app.py"}),
            ("read_file", {}),
        ]:
            out = run_tool(session, name, args, "bad")
            assert out.is_error and out.text.startswith("Error: "), (name, args, out)


def test_an_agent_loop_with_pruning_never_relies_on_a_cleared_result(tmp_path: Path) -> None:
    """The README's loop: tools from filecache, prune before every request."""
    (tmp_path / "app.py").write_text(TEXT)
    # cache_aware=False: at this size the cost gate (rightly) finds no cut that pays
    policy = PrunePolicy(
        context_window=2_000,
        protect_recent=300,
        min_reclaim=50,
        small_result=200,
        cache_aware=False,
    )
    messages: list[dict[str, object]] = [{"role": "user", "content": "tidy app.py"}]
    pruned = 0
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        for turn in range(8):
            if turn == 4:  # an outside change: the next reads are diffs or content again
                (tmp_path / "app.py").write_text(TEXT.replace("compute(3,", "compute(33,"))
            result = prune_messages(messages, session=session, policy=policy)
            pruned += len(result.plan.actions)
            sent = result.messages
            call_id = f"call_{turn}"
            args = {"path": "app.py"} if turn % 3 else {"path": "app.py", "offset": 5, "limit": 20}
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "read_file", "arguments": json.dumps(args)},
                        }
                    ],
                }
            )
            out = run_tool(session, "read_file", args, call_id)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": out.text})
            record = session.ledger().calls[call_id]
            if record.base_call_id is not None:
                base = next(m for m in sent if m.get("tool_call_id") == record.base_call_id)
                assert not str(base["content"]).startswith("[cleared tool result")
    assert pruned > 0  # the window is small enough that pruning did happen


# -- the tool table: fresh copies, strict mode, strict arguments, one wording ------------------


@pytest.mark.parametrize("style", ["openai", "responses", "anthropic", "mcp"])
def test_schemas_are_new_dicts_on_every_call(style: str) -> None:
    """openai-agents' strict mode rewrites the schemas it is given, in place."""
    before = json.dumps(schemas(style))
    for tool in schemas(style):
        params = _params(tool)
        params["required"] = list(params["properties"])  # what strict mode does
        for prop in params["properties"].values():
            prop["description"] = "changed"
        params["properties"].clear()
    assert json.dumps(schemas(style)) == before


def _params(tool: dict[str, Any]) -> dict[str, Any]:
    for key in ("parameters", "input_schema", "inputSchema"):
        if key in tool:
            schema: dict[str, Any] = tool[key]
            return schema
    return _params(tool["function"])


def _strict_mode_violations(schema: dict[str, Any], where: str = "") -> list[str]:
    """What OpenAI's strict mode refuses: objects must list every property as required and set
    additionalProperties false; no default/minimum; optional values are nullable instead."""
    out: list[str] = []
    if schema.get("type") == "object":
        if schema.get("additionalProperties") is not False:
            out.append(f"{where}: additionalProperties is not false")
        if sorted(schema.get("required", [])) != sorted(schema.get("properties", {})):
            out.append(f"{where}: not every property is required")
        for name, sub in schema.get("properties", {}).items():
            out += _strict_mode_violations(sub, f"{where}.{name}")
    for key in ("default", "minimum", "maximum", "minLength", "maxLength", "pattern", "format"):
        if key in schema:
            out.append(f"{where}: {key}")
    return out


@pytest.mark.parametrize("style", ["openai", "responses", "anthropic"])
def test_strict_schemas_are_valid_under_openai_strict_mode(style: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")  # in the dev extra
    for tool in schemas(style, strict=True):
        flags = tool["function"] if style == "openai" else tool
        assert flags["strict"] is True
        params = _params(tool)
        assert _strict_mode_violations(params) == []
        jsonschema.Draft202012Validator.check_schema(params)
    read = _params(schemas(style, strict=True)[0])
    assert read["properties"]["offset"]["type"] == ["integer", "null"]
    assert read["properties"]["mode"]["enum"] == ["auto", "full", "outline", None]
    assert read["properties"]["path"]["type"] == "string"  # required: not nullable
    validator = jsonschema.Draft202012Validator(read)
    nulls = {"path": "a.py", "offset": None, "limit": None, "mode": None, "symbol": None}
    assert validator.is_valid({**nulls, "fresh": None})
    assert not validator.is_valid(nulls)  # strict mode sends every property
    assert not validator.is_valid({**nulls, "fresh": None, "extra": 1})
    # the plain schemas keep optional properties optional, with their limits
    plain = _params(schemas(style)[0])
    assert plain["required"] == ["path"] and plain["properties"]["offset"]["minimum"] == 1
    assert plain["properties"]["offset"]["type"] == "integer"


def test_run_tool_takes_what_strict_mode_sends(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(TEXT)
    nulls = {"offset": None, "limit": None, "mode": None, "symbol": None, "fresh": None}
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        out = run_tool(session, "read_file", {"path": "app.py", **nulls}, "c1")
        assert not out.is_error and out.text.startswith("[app.py: 120 lines")
        edit = {
            "path": "app.py",
            "old_string": "compute(1,",
            "new_string": "x(",
            "replace_all": None,
        }
        assert not run_tool(session, "edit_file", edit, "c2").is_error


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("read_file", {"path": "app.py", "offset": "5"}, "'offset' must be an integer, got '5'"),
        ("read_file", {"path": "app.py", "offset": True}, "'offset' must be an integer, got True"),
        ("read_file", {"path": "app.py", "limit": 2.0}, "'limit' must be an integer, got 2.0"),
        ("read_file", {"path": "app.py", "fresh": "yes"}, "'fresh' must be true or false"),
        ("read_file", {"path": "app.py", "fresh": 1}, "'fresh' must be true or false, got 1"),
        ("read_file", {"path": "app.py", "fresh": "true"}, "'fresh' must be true or false"),
        ("read_file", {"path": "app.py", "offset": 0}, "'offset' must be 1 or more, got 0"),
        ("read_file", {"path": "app.py", "mode": "sideways"}, "one of auto, full, outline"),
        ("read_file", {"path": 5}, "'path' must be a string, got 5"),
        ("read_file", {"path": "app.py", "pth": "x"}, "unknown argument 'pth'; read_file takes"),
        ("read_file", {"offset": 1}, "missing argument 'path'"),
        ("read_file", [1, 2], "arguments must be a JSON object"),
        ("read_file", "[" * 100_000, "arguments are not valid JSON"),
        ("edit_file", {"path": "app.py", "old_string": "a", "new_string": None}, "'new_string'"),
        (
            "edit_file",
            {"path": "app.py", "old_string": "a", "new_string": "b", "replace_all": "no"},
            "'replace_all' must be true or false, got 'no'",
        ),
        ("write_file", {"path": "new.py", "content": "x\n", "mode": "full"}, "unknown argument"),
        ("cache_stats", {}, "unknown tool 'cache_stats'"),
    ],
)
def test_run_tool_checks_arguments_strictly(
    tmp_path: Path, tool: str, args: Any, message: str
) -> None:
    (tmp_path / "app.py").write_text(TEXT)
    with FileCache(tmp_path, store=":memory:") as cache:
        out = run_tool(cache.session(), tool, args, "c1")
    assert out.is_error and message in out.text, out.text
    assert "\n" not in out.text and len(out.text) < 200
    assert not (tmp_path / "new.py").exists()


def test_check_arguments_fills_every_parameter() -> None:
    args = check_arguments(READ_FILE, '{"path": "a.py", "fresh": true}')
    assert args == {
        "path": "a.py",
        "offset": None,
        "limit": None,
        "mode": None,
        "symbol": None,
        "fresh": True,
    }
    assert check_arguments(tool_spec("cache_stats"), None) == {}


def test_one_wording_in_every_generated_form() -> None:
    """Every tool and parameter description of the table, word for word, in the OpenAI,
    Responses, Anthropic and MCP schemas (plain and strict), the middleware's fresh flag and
    the CLI's option help."""
    from filecache.cli import main

    for style in ("openai", "responses", "anthropic", "mcp"):
        for strict in (False, True):
            by_name = {(t.get("function") or t)["name"]: t for t in schemas(style, strict=strict)}
            for spec in TOOL_SPECS if style == "mcp" else FILE_TOOL_SPECS:
                tool = by_name[spec.name]
                assert (tool.get("function") or tool)["description"].startswith(spec.description)
                properties = _params(tool)["properties"]
                assert list(properties) == [p.name for p in spec.params]
                for param in spec.params:
                    assert properties[param.name]["description"] == param.description
    cli = {  # CLI command -> option name -> (tool, parameter)
        "read": {p: ("read_file", p) for p in ("offset", "limit", "mode", "symbol", "fresh")},
        "write": {"content": ("write_file", "content")},
        "edit": {
            "old_string": ("edit_file", "old_string"),
            "new_string": ("edit_file", "new_string"),
            "replace_all": ("edit_file", "replace_all"),
        },
    }
    for command, options in cli.items():
        helps = {p.name: getattr(p, "help", None) for p in main.commands[command].params}
        for option, (tool, param) in options.items():
            assert param_help(tool, param) in (helps[option] or ""), (command, option)
    assert param_help("read_file", "fresh") == READ_FILE.param("fresh").description
