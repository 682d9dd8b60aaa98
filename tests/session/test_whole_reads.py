"""An explicit whole-file read is answered with the file, not an outline, in the hosts (Claude
Code and opencode through ``HostSession.read``, Codex through ``HostSession.shell``) and in
decorated tools: there the model asked its own tool for the content, and its own tool would have
shown it. Outlines serve inactive files (pruning), explicit ``mode="outline"`` requests, and
``mode="auto"`` callers whose own tool abbreviates (SWE-agent's viewer, replay's default)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from filecache.adapters.hosts.base import HostSession

from filecache import FileCache, Session

# Over the outline threshold (6,000 tokens): mode="auto" outlines it.
LARGE = "".join(
    f"def function_{n}(argument_{n}, other_{n}):\n"
    f'    """Return a value computed from argument {n} and its companion."""\n'
    f"    return argument_{n} * {n} + other_{n} - {n % 7}\n\n\n"
    for n in range(400)
)


@pytest.fixture
def large(root: Path) -> str:
    (root / "big.py").write_text(LARGE, encoding="utf-8")
    return LARGE


@pytest.fixture
def host(root: Path, large: str) -> Iterator[HostSession]:
    with HostSession.open("test-host", "whole-reads", root) as hs:
        yield hs


def test_the_file_is_large_enough_for_auto_to_outline(cache: FileCache, large: str) -> None:
    # the premise of the tests below: the same read in mode="auto" is an outline
    session = cache.session("auto")
    assert session.read("big.py").kind == "outline"
    assert session.read("big.py", mode="outline", call_id="c2").kind == "outline"


def test_a_hosts_whole_file_read_is_the_content(host: HostSession, large: str) -> None:
    answer = host.read("big.py", "toolu_1", host_text=large)
    assert answer is not None and answer.kind == "full" and answer.same_as_host
    again = host.read("big.py", "toolu_2", host_text=large)
    assert again is not None and again.kind == "unchanged" and again.base_call_id == "toolu_1"


def test_a_hosts_whole_file_read_without_the_hosts_text_is_the_content(
    host: HostSession, large: str
) -> None:
    answer = host.read("big.py", "toolu_1")
    assert answer is not None and answer.kind == "full" and answer.text == large


def test_a_hosts_shell_read_of_the_whole_file_is_the_shells_output(
    host: HostSession, large: str
) -> None:
    assert host.shell("cat big.py", "call_1", output=large) is None  # the host's output stands
    again = host.shell("cat big.py", "call_2", output=large)
    assert again is not None and "call_1" in again  # a FileRef to the content, not an outline


def test_a_decorated_read_tool_returns_its_output(cache: FileCache, root: Path, large: str) -> None:
    session: Session = cache.session("decorated")

    @session.read_tool
    def read_file(path: str) -> str:
        """Read a file."""
        return (root / path).read_text(encoding="utf-8")

    first = read_file("big.py", call_id="c1")
    assert first == large
    assert session.ledger().calls["c1"].kind == "full"
    second = read_file("big.py", call_id="c2")
    assert "c1" in second and len(second) < 300  # a FileRef to the content


def test_a_decorated_answer_is_never_larger_than_the_tools_own_output(
    cache: FileCache, root: Path
) -> None:
    """A FileRef of a tiny file is longer than the file: a decorated tool knows its own output,
    so it returns that output (as content, whose lines the model then holds) instead; a large
    file's re-read stays a FileRef (issue 34: never larger than the agent's own tool)."""
    (root / "tiny.txt").write_text("x = 1\n", encoding="utf-8")
    session: Session = cache.session("tiny")

    @session.read_tool
    def read_file(path: str) -> str:
        """Read a file."""
        return (root / path).read_text(encoding="utf-8")

    assert read_file("tiny.txt", call_id="c1") == "x = 1\n"
    assert read_file("tiny.txt", call_id="c2") == "x = 1\n"  # not a 30-token FileRef
    calls = session.ledger().calls
    assert calls["c2"].kind == "full" and calls["c2"].tokens <= calls["c2"].tokens_full
    (root / "big.txt").write_text(LARGE, encoding="utf-8")
    assert read_file("big.txt", call_id="c3") == LARGE
    again = read_file("big.txt", call_id="c4")
    assert "c3" in again and len(again) < 300
