"""Decorators in agent frameworks' terms: async tools, framework call ids, conversations, the
visible ``fresh`` parameter, decoration-time errors and the marker guard on writes."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from filecache import ConfigError, FileCache, MarkerError, Session


def numbered(text: str) -> str:
    return "".join(f"{n:6d}\t{line}" for n, line in enumerate(text.splitlines(True), 1))


@dataclass
class Ctx:
    """Stands for a framework's context object (pydantic-ai RunContext, openai-agents
    ToolContext): what matters is its ``tool_call_id`` attribute."""

    tool_call_id: str


@pytest.fixture
def session(cache: FileCache) -> Session:
    return cache.session("deco-async")


def test_async_read_tool_caches_and_names_the_generated_id(session: Session, root: Path) -> None:
    @session.read_tool
    async def read_file(path: str) -> str:
        """Read a file."""
        await asyncio.sleep(0)
        return numbered((root / path).read_text(encoding="utf-8"))

    assert inspect.iscoroutinefunction(read_file)

    async def run() -> tuple[str, str]:
        return await read_file("notes.txt"), await read_file("notes.txt")

    first, second = asyncio.run(run())
    tag, _, body = first.partition("\n")
    assert body == numbered((root / "notes.txt").read_text(encoding="utf-8"))
    cid = tag.split()[2].rstrip(":")
    assert tag.startswith("[filecache] result fc-") and cid.startswith("fc-")
    assert "unchanged" in second and cid in second  # the id the first answer showed


def test_async_edit_tool_records_and_guards(session: Session, root: Path) -> None:
    @session.edit_tool
    async def edit_file(path: str, old_string: str, new_string: str) -> str:
        target = root / path
        target.write_text(target.read_text(encoding="utf-8").replace(old_string, new_string))
        return "ok"

    assert asyncio.run(edit_file("src/app.py", "return 1", "return 2", call_id="e1")) == "ok"
    assert [w.call_id for w in session.ledger().writes["src/app.py"]] == ["e1"]
    with pytest.raises(MarkerError, match="fresh=true"):
        asyncio.run(edit_file("src/app.py", "return 2", "[filecache] src/app.py unchanged"))
    assert (root / "src/app.py").read_text() == "def main():\n    return 2\n"


def test_call_id_comes_from_a_context_argument_and_stays_out_of_the_key(
    session: Session, root: Path
) -> None:
    @session.read_tool
    def read_file(ctx: Ctx, path: str) -> str:
        return (root / path).read_text(encoding="utf-8")

    first = read_file(Ctx("call_A"), "notes.txt")
    assert not first.startswith("[filecache]")  # the framework's id: no tag needed
    second = read_file(Ctx("call_B"), "notes.txt")
    assert "unchanged since your result call_A" in second
    calls = session.ledger().calls
    assert calls["call_B"].base_call_id == "call_A"


def test_read_tools_show_a_fresh_parameter_and_document_it(session: Session, root: Path) -> None:
    @session.read_tool
    def read_file(path: str, offset: int = 1) -> str:
        """Read a file.

        Args:
            path: the file.
            offset: first line.
        """
        return (root / path).read_text(encoding="utf-8")

    params = inspect.signature(read_file).parameters
    assert list(params) == ["path", "offset", "fresh"]
    assert params["fresh"].default is False and params["fresh"].annotation is bool
    doc = inspect.getdoc(read_file) or ""
    assert "    offset: first line.\n    fresh: Send the full output again" in doc
    read_file("notes.txt", call_id="r1")
    assert "unchanged" in read_file("notes.txt", call_id="r2")
    assert read_file("notes.txt", fresh=True, call_id="r3").startswith("line 1:")


def test_undocumented_tool_gets_an_args_section() -> None:
    from filecache.tool_shape import add_fresh_doc

    assert add_fresh_doc("Read a file.").startswith("Read a file.\n\nArgs:\n    fresh: ")
    assert add_fresh_doc(None).startswith("Args:\n    fresh: ")


def _gen(path: str):  # type: ignore[no-untyped-def]
    yield path


async def _agen(path: str):  # type: ignore[no-untyped-def]
    yield path


@pytest.mark.parametrize(
    ("fn", "options", "error", "match"),
    [
        (_gen, {}, TypeError, "generator"),
        (_agen, {}, TypeError, "generator"),
        (Ctx, {}, TypeError, "decorates a function"),
        ("read_file", {}, TypeError, "decorates a function"),
        (lambda: "", {}, TypeError, "no argument that could name the file"),
        (lambda path, offset=1: "", {"offset": "start"}, ConfigError, "no parameter 'start'"),
        (lambda path, offset: "", {"offset": "offset"}, ConfigError, "needs a default"),
        (lambda path: "", {"path": "file"}, ConfigError, "no parameter 'file'"),
        (lambda path, offset=0: "", {"offset": "offset", "first_line": 2}, ConfigError, "0 or 1"),
    ],
)
def test_what_cannot_be_wrapped_fails_at_decoration(
    session: Session, fn: object, options: dict[str, object], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        session.read_tool(**options)(fn)


def test_a_sync_tool_returning_a_coroutine_is_an_error_not_a_silent_pass(
    session: Session,
) -> None:
    async def inner() -> str:
        return "text"

    @session.read_tool
    def read_file(path: str):  # type: ignore[no-untyped-def]
        return inner()

    with pytest.raises(TypeError, match="async def"):
        read_file("notes.txt")
    assert session.ledger().calls == {}


def test_decorating_with_something_else_fails(root: Path) -> None:
    from filecache.decorators import read_tool

    with pytest.raises(TypeError, match="Session or FileCache"):
        read_tool(root, lambda path: "")  # type: ignore[call-overload]


# -- conversations ----------------------------------------------------------------------------


@pytest.fixture
def conv_read(cache: FileCache, root: Path) -> Callable[..., str]:
    @cache.read_tool
    def read_file(path: str) -> str:
        return numbered((root / path).read_text(encoding="utf-8"))

    return read_file


def test_conversations_never_share_filerefs(
    cache: FileCache, conv_read: Callable[..., str]
) -> None:
    with cache.conversation("run-1"):
        conv_read("notes.txt", call_id="a1")
        assert "unchanged since your result a1" in conv_read("notes.txt", call_id="a2")
    with cache.conversation("run-2"):
        first = conv_read("notes.txt", call_id="b1")
        assert "unchanged" not in first and first.startswith("     1\t")
    with cache.conversation("run-1"):  # continued from the store
        assert "unchanged since your result a1" in conv_read("notes.txt", call_id="a3")


def test_no_conversation_bound_is_a_clear_error(
    cache: FileCache, conv_read: Callable[..., str]
) -> None:
    with pytest.raises(ConfigError, match=r"cache.conversation\(run_id\)"):
        conv_read("notes.txt")


def test_threads_and_tasks_each_see_their_own_conversation(
    cache: FileCache, root: Path, conv_read: Callable[..., str]
) -> None:
    answers: dict[str, list[str]] = {}
    barrier = threading.Barrier(4)

    def run(name: str) -> None:
        with cache.conversation(name):
            barrier.wait()
            answers[name] = [conv_read("notes.txt", call_id=f"{name}-{i}") for i in range(3)]

    threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, got in answers.items():
        assert "unchanged" not in got[0]
        assert f"since your result {name}-0" in got[1] and f"since your result {name}-0" in got[2]

    @cache.read_tool
    async def aread(path: str) -> str:
        await asyncio.sleep(0)
        return numbered((root / path).read_text(encoding="utf-8"))

    async def task(name: str) -> list[str]:
        with cache.conversation(name):
            return [await aread("notes.txt", call_id=f"{name}-{i}") for i in range(2)]

    async def main() -> list[list[str]]:
        return list(await asyncio.gather(*(task(f"task{i}") for i in range(3))))

    for i, (one, two) in enumerate(asyncio.run(main())):
        assert "unchanged" not in one and f"since your result task{i}-0" in two


def test_a_session_can_be_bound_and_the_innermost_binding_wins(
    cache: FileCache, conv_read: Callable[..., str]
) -> None:
    mine = cache.session("explicit")
    with cache.conversation("outer"):
        conv_read("notes.txt", call_id="o1")
        with cache.conversation(mine) as bound:
            assert bound is mine
            assert "unchanged" not in conv_read("notes.txt", call_id="m1")
        assert "since your result o1" in conv_read("notes.txt", call_id="o2")
    with pytest.raises(ConfigError, match="non-empty string"):
        with cache.conversation(""):
            pass


# -- the marker guard ---------------------------------------------------------------------------


def test_write_tool_refuses_a_fileref_and_writes_nothing(session: Session, root: Path) -> None:
    @session.read_tool
    def read_file(path: str) -> str:
        return (root / path).read_text(encoding="utf-8")

    @session.write_tool
    def write_file(path: str, content: str) -> str:
        (root / path).write_text(content, encoding="utf-8")
        return "written"

    read_file("notes.txt", call_id="r1")
    ref = read_file("notes.txt", call_id="r2")  # what a CodeAgent might write back
    assert ref.startswith("[filecache]")
    with pytest.raises(MarkerError, match="src/app.py: .*fresh=true"):
        write_file("src/app.py", ref, call_id="w1")
    assert (root / "src/app.py").read_text() == "def main():\n    return 1\n"
    assert "w1" not in session.ledger().calls
    placeholder = "[cleared tool result: read src/app.py 1-2]"
    with pytest.raises(MarkerError):
        write_file(path="x.py", content=placeholder)
    assert not (root / "x.py").exists()


def test_a_file_that_already_holds_markers_may_keep_them(session: Session, root: Path) -> None:
    (root / "doc.md").write_text("Answers start with [filecache].\n", encoding="utf-8")

    @session.write_tool
    def write_file(path: str, content: str) -> str:
        (root / path).write_text(content, encoding="utf-8")
        return "written"

    @session.edit_tool
    def edit_file(path: str, edits: list[tuple[str, str]]) -> str:
        return "edited"

    write_file("doc.md", "Answers start with [filecache]. Really.\n")
    assert edit_file("doc.md", [("[filecache]", "[filecache] (the marker)")]) == "edited"
    with pytest.raises(MarkerError):
        edit_file("doc.md", [("marker", "[filecache] marker")])

    @session.write_tool(allow_markers=True)
    def write_any(path: str, content: str) -> str:
        return "written"

    assert write_any("other.md", "[filecache] is fine here") == "written"


def test_the_async_face_of_session(session: Session) -> None:
    async def main() -> tuple[str, str, str]:
        first = await session.aread("notes.txt", call_id="r1")
        edited = await session.aedit("notes.txt", "line 5:", "line five:", call_id="e1")
        written = await session.awrite("new.txt", "hello\n", call_id="w1")
        again = await session.aread("notes.txt", call_id="r2")
        assert first.kind == "full" and again.kind == "unchanged"
        return edited.kind, written.kind, again.base_call_id or ""

    assert asyncio.run(main()) == ("edited", "written", "e1")
    assert session.ledger().calls["e1"].tool == "edit"
