"""The framework adapters' tool functions are generated from ``TOOL_SPECS``
(``filecache.adapters.frameworks.tool_function``): one parameter per spec parameter, the
spec's docstring, the framework's call-id parameter where it says, one dispatcher
(``run_tool``), and an error prefixed once."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from filecache.adapters.frameworks import CallIdParam, tool_function, tool_functions

from filecache import FileCache
from filecache.tools import EDIT_FILE, FILE_TOOL_SPECS, READ_FILE, run_tool, tool_docstring


class Ctx:
    def __init__(self, tool_call_id: str) -> None:
        self.tool_call_id = tool_call_id


CONTEXT = CallIdParam("ctx", Ctx, first=True, call_id=lambda ctx: ctx.tool_call_id)
INJECTED = CallIdParam("tool_call_id", str, first=False, call_id=lambda cid: cid)


@pytest.mark.parametrize("spec", FILE_TOOL_SPECS, ids=lambda s: s.name)
def test_a_tool_function_is_its_spec(cache: FileCache, spec: Any) -> None:
    fn = tool_function(cache.session("s"), spec)
    params = inspect.signature(fn).parameters
    assert fn.__name__ == spec.name and fn.__doc__ == tool_docstring(spec)
    assert list(params) == [p.name for p in spec.params]
    for p in spec.params:
        given = params[p.name]
        if p.required:
            assert given.default is inspect.Parameter.empty
        else:
            assert given.default == p.default  # None where the spec has none
    for p in spec.params:  # every parameter is documented, by the spec's own words
        assert f"\n    {p.name}: {p.description}" in (fn.__doc__ or "")


def test_the_call_id_parameter_goes_where_the_framework_looks(cache: FileCache) -> None:
    session = cache.session("s")
    first = tool_function(session, READ_FILE, call_id=CONTEXT)
    assert list(inspect.signature(first).parameters)[:2] == ["ctx", "path"]
    after = tool_function(session, EDIT_FILE, call_id=INJECTED)
    names = list(inspect.signature(after).parameters)
    assert names == ["path", "old_string", "new_string", "tool_call_id", "replace_all"]
    assert first.__annotations__["ctx"] is Ctx and first.__annotations__["return"] is str


def test_calls_answer_with_the_framework_call_id(cache: FileCache) -> None:
    session = cache.session("s")
    read = tool_function(session, READ_FILE, call_id=CONTEXT)
    assert read(Ctx("c1"), "notes.txt").startswith("[notes.txt: ")
    assert read(Ctx("c2"), path="notes.txt").startswith(
        "[filecache] notes.txt unchanged since your result c1"
    )
    aread = tool_function(session, READ_FILE, call_id=CONTEXT, is_async=True)
    assert inspect.iscoroutinefunction(aread)
    again = asyncio.run(aread(Ctx("c3"), "notes.txt", fresh=True))
    assert again.startswith("[notes.txt: ")


def test_an_error_is_prefixed_once_and_is_what_run_tool_says(cache: FileCache) -> None:
    session = cache.session("s")
    read, _, edit = tool_functions(session, call_id=INJECTED)
    text = read("missing.txt", "c1")
    assert text == run_tool(session, "read_file", {"path": "missing.txt"}, "c9").text
    assert text.startswith("Error: missing.txt") and text.count("Error:") == 1
    refused = edit("notes.txt", "no such text", "x", "c2")
    assert refused.startswith("Error: ") and refused.count("Error:") == 1


def test_arguments_that_do_not_bind_raise_as_a_python_call_would(cache: FileCache) -> None:
    read = tool_function(cache.session("s"), READ_FILE)
    with pytest.raises(TypeError):
        read()
    with pytest.raises(TypeError):
        read("notes.txt", nonsense=1)
