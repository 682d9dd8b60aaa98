"""The gateway transform's invariants over generated conversations (hypothesis).

A conversation grows one turn at a time: each turn is a Claude Code tool call on a small set of
files (``Read`` with or without a range, ``Edit``, ``Write``, Bash ``cat``, ``cat -n``,
``nl -ba``, ``sed -n``, ``head``, ``tail -n +N``), its result as Claude Code shows it (a Bash
output without its leading and trailing blank lines, sometimes cut by the shell tool), so Bash
reads are named by later Reads and the reverse. Files hold blank, spaces-only, tab-indented and
CR-ended lines, maybe as their last line, with or without a last newline; a whole Read may show
the empty line after the last newline. Every request (all messages so far) goes through
``rewrite_request`` with one memory. The oracle is the generator's own record of what each
result shows (path, first line, lines), never the transform's parser:

- every FileRef names a result present in the same request, sent as content, whose lines at the
  FileRef's range equal the lines the rewritten result showed;
- every diff, applied (unidiff parses it) to the named result's lines, gives the lines the
  rewritten result showed;
- a message's rewrite is byte-identical in every later request unless pruning changes it, and
  a pruned result's bytes stay identical afterwards (sticky);
- tool_use/tool_result ids, their order and pairing are those of the input; every other
  message and block is the input's own.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from unidiff import PatchSet

from filecache.gateway import GatewayPolicy, open_memory, rewrite_request

_COUNT = int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300"))
EXAMPLES = max(40, _COUNT // 8)  # a conversation replayed request by request: a prune replay
PREFIX_EXAMPLES = max(30, _COUNT // 10)
GARBAGE_EXAMPLES = _COUNT
WORDS = ("alpha", "beta", "gamma", "delta", "omega", "theta", "kappa", "sigma")
PATHS = ("a.py", "b.py", "c.py")
REMINDER = "\n\n<system-reminder>\nWhenever you read a file...\n</system-reminder>\n"
_REF = re.compile(
    r"^\[filecache\] (\S+) unchanged since your result (\S+) \(lines? (\d+)(?:-(\d+))? as shown"
)
_DIFF = re.compile(
    r"^\[filecache\] (\S+) changed since your result (\S+) \(lines? (\d+)(?:-(\d+))? now"
)


def line_text(draw: Any) -> str:
    words = draw(st.lists(st.sampled_from(WORDS), min_size=3, max_size=6))
    return "    " + " ".join(words)


def file_line(draw: Any) -> str:
    """A line of a file: mostly words, sometimes blank, spaces only, tab-indented or ending in
    a carriage return (a CRLF file)."""
    kind = draw(st.sampled_from(["words"] * 6 + ["blank", "spaces", "tab", "cr"]))
    if kind == "blank":
        return ""
    if kind == "spaces":
        return "    "
    text = line_text(draw)
    return "\t" + text.strip() if kind == "tab" else text + "\r" if kind == "cr" else text


SHELL_OPS = ("cat", "cat -n", "nl", "sed", "sed1", "head", "tail")


def _shell_read(draw: Any, path: str, lines: list[str]) -> tuple[str, int, list[str], bool]:
    """A Bash read of ``lines``: (command, the line its output starts at, the lines it
    prints, whether it numbers them)."""
    op = draw(st.sampled_from(SHELL_OPS))
    size = len(lines)
    a = draw(st.integers(1, size))
    b = draw(st.integers(a, size + 3))  # a range may run past the end
    if op in ("cat", "cat -n", "nl"):
        command = {"cat": "cat {}", "cat -n": "cat -n {}", "nl": "nl -ba {}"}[op]
        return command.format(path), 1, lines, op != "cat"
    if op == "sed":
        return f"sed -n '{a},{b}p' {path}", a, lines[a - 1 : b], False
    if op == "sed1":
        return f"sed -n {a}p {path}", a, lines[a - 1 : a], False
    if op == "head":
        return f"head -n {b} {path}", 1, lines[:b], False
    return f"tail -n +{a} {path}", a, lines[a - 1 :], False


def claude_code_bash(rows: list[str]) -> str:
    """What Claude Code's Bash tool shows of a command's output lines: stdout without its
    leading and trailing whitespace-only lines (and so without its last newline)."""
    while rows and not rows[0].strip():
        rows = rows[1:]
    while rows and not rows[-1].strip():
        rows = rows[:-1]
    return "\n".join(rows)


@dataclass
class World:
    files: dict[str, list[str]]
    messages: list[dict[str, Any]] = field(default_factory=list)
    shows: dict[str, tuple[str, int, list[str]]] = field(default_factory=dict)
    tabbed: set[str] = field(default_factory=set)  # results numbered ``N<TAB>`` (cat -n, nl)
    snippets: dict[str, str] = field(default_factory=dict)  # edit call id -> its new text
    n: int = 0


def _turn(world: World, name: str, args: dict[str, Any], text: str) -> str:
    world.n += 1
    cid = f"toolu_{world.n:03d}"
    world.messages.append(
        {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": name,
                                            "input": args}]}
    )  # fmt: skip
    world.messages.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": text}]}
    )
    return cid


def _bash(draw: Any, world: World, name: str) -> None:
    """A Bash read as Claude Code shows it. The record is what the output shows counted from
    the line the command starts at (a reader of the output can place its rows no other way:
    Claude Code drops leading blank lines, so a FileRef's claim is about the rows as shown), or
    nothing for an output the shell cut (Claude Code's ``... [N lines truncated] ...``): it
    must never be rewritten or named."""
    command, start, printed, numbered = _shell_read(draw, name, world.files[name])
    if numbered:
        rows = [f"{n:>6}\t{t}" for n, t in enumerate(printed, start)]
    else:
        rows = list(printed)
    text = claude_code_bash(rows)
    cut = draw(st.integers(0, 3)) == 0 and len(text) > 40
    if cut:
        keep = draw(st.integers(len(text) // 2, len(text) - 1))
        rest = text[keep:].count("\n") + 1
        text = f"{text[:keep]}\n\n... [{rest} lines truncated] ..."
    cid = _turn(world, "Bash", {"command": command}, text)
    if cut or not text:
        return
    if numbered:
        world.tabbed.add(cid)
    shown = printed if numbered else text.split("\n")  # counted from ``start``, as shown
    world.shows[cid] = (f"/p/{name}", start, list(shown))


@st.composite
def conversations(draw: Any) -> World:
    files = {p: [line_text(draw) for _ in range(draw(st.integers(8, 60)))] for p in PATHS[:2]}
    for lines in files.values():
        for k in draw(st.lists(st.integers(0, len(lines) - 1), max_size=6)):
            lines[k] = file_line(draw)  # blank, spaces-only, tabbed, CR lines; maybe the last
    world = World(files)
    world.messages.append({"role": "user", "content": "tidy the files"})
    for _ in range(draw(st.integers(2, 14))):
        op = draw(st.sampled_from(["read", "read", "range", "bash", "bash", "edit", "edit",
                                   "write"]))  # fmt: skip
        name = draw(st.sampled_from(PATHS[:2]))
        path = f"/p/{name}"
        lines = world.files[name]
        if op == "bash":
            _bash(draw, world, name)
        elif op in ("read", "range"):
            start, end = 1, len(lines)
            args: dict[str, Any] = {"file_path": path}
            if op == "range":
                start = draw(st.integers(1, len(lines)))
                end = draw(st.integers(start, len(lines)))
                args |= {"offset": start, "limit": end - start + 1}
            shown = lines[start - 1 : end]
            if op == "read" and draw(st.booleans()):
                shown = [*shown, ""]  # the empty line after the last newline (Claude Code 2.0)
            text = "\n".join(f"{n:>6}→{t}" for n, t in enumerate(shown, start))
            if draw(st.booleans()):
                text += "\n\n<system-reminder>\nWhenever you read a file...\n</system-reminder>\n"
            cid = _turn(world, "Read", args, text)
            world.shows[cid] = (path, start, list(shown))
        elif op == "edit":
            k = draw(st.integers(0, len(lines) - 1))
            added = [line_text(draw) for _ in range(draw(st.integers(1, 12)))]
            new = "\n".join(added)
            args = {"file_path": path, "old_string": lines[k], "new_string": new}
            lines[k : k + 1] = added
            if draw(st.booleans()):  # Claude Code before 2.x: a snippet around the edit
                first = max(0, k - draw(st.integers(0, 4)))
                last = min(len(lines), k + len(added) + draw(st.integers(0, 4)))
                rows = "\n".join(f"{n:>6}→{t}" for n, t in enumerate(lines[first:last], first + 1))
                text = (
                    f"The file {path} has been updated. Here's the result of running `cat -n` "
                    f"on a snippet of the edited file:\n{rows}"
                )
                cid = _turn(world, "Edit", args, text)
                world.snippets[cid] = new
            else:
                _turn(world, "Edit", args, f"The file {path} has been updated successfully.")
        else:
            world.files[name] = [line_text(draw) for _ in range(draw(st.integers(8, 60)))]
            content = "\n".join(world.files[name]) + draw(st.sampled_from(["\n", ""]))
            _turn(world, "Write", {"file_path": path, "content": content},
                  f"File created successfully at: {path}")  # fmt: skip
    return world


def _request(messages: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {"model": "claude-x", "system": [{"type": "text", "text": "Working directory: /p"}],
         "messages": messages, "metadata": {"user_id": "user_1_account_2_session_abcdef12"}},
        ensure_ascii=False,
    ).encode()  # fmt: skip


def _results(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {
        b["tool_use_id"]: b["content"] if isinstance(b["content"], str) else b["content"][0]["text"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    }


def _ids(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (b["type"], b.get("id") or b.get("tool_use_id"))
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
    ]


def _apply(diff: str, base: tuple[str, int, list[str]]) -> list[str]:
    _, start, lines = base
    out = list(lines)
    offset = 0
    for hunk in PatchSet(diff)[0]:
        at = hunk.source_start - start + offset - (0 if hunk.source_length else -1)
        old = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_removed]
        new = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_added]
        assert out[at : at + len(old)] == old
        out[at : at + len(old)] = new
        offset += len(new) - len(old)
    return out


_SEVERAL = re.compile(
    r"^\[filecache\] (\S+) unchanged since your results? (\S+(?: and \S+)*) \("
    r"(lines?) ([-\d ,and]+?) as shown there(?:: ([^;)]*))?(?:; lines? ([-\d and]+?) (?:is|are) "
    r"below, as read)?\): use that text;"
)


def _spans(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b or a)) for a, b in re.findall(r"(\d+)(?:-(\d+))?", text)]


def _host_lines(cid: str, text: str, world: World) -> list[str]:
    """The line texts of rows as the host showed them (a Read's ``N→``, else as they are)."""
    rows = text.split("\n")
    if cid in world.tabbed:
        return [row.split("\t", 1)[1] for row in rows]
    if cid in world.shows and "→" in text:
        return [row.split("→", 1)[1] for row in rows]
    return rows


def check_several(
    world: World, before: dict[str, str], after: dict[str, str], cid: str, text: str
) -> None:
    """A FileRef naming several results, or some lines as content: expanding each named span
    from the generator's record of the named result, and the content rows as they are, gives
    exactly the lines the host's tool returned for ``cid``."""
    found = _SEVERAL.match(text)
    assert found is not None, text
    bases = found[2].split(" and ")
    head, _, below = text.partition("\n")
    segments: list[tuple[int, int, str | None]] = []
    if found[5]:
        assert len(bases) > 1
        for part in found[5].split(", "):
            where, _, base = part.rpartition(" in ")
            assert base in bases
            segments += [(a, b, base) for a, b in _spans(where)]
    else:
        assert len(bases) == 1
        segments += [(a, b, bases[0]) for a, b in _spans(found[4])]
    content = _spans(found[6] or "")
    segments += [(a, b, None) for a, b in content]
    segments.sort()
    assert len(bases) > 1 or content, text  # else it would be the one-result FileRef
    mine = world.shows[cid]
    path, start, lines = mine
    assert found[1] == path
    expanded: list[str] = []
    rows = below.split("\n")
    for a, b, base in segments:
        assert a == start + len(expanded)  # contiguous, in line order, from the first line
        if base is None:
            given, rows = rows[: b - a + 1], rows[b - a + 1 :]
            expanded += _host_lines(cid, "\n".join(given), world)
        else:
            assert base in after and after[base] == before[base]  # present, sent as content
            theirs = world.shows[base]
            assert theirs[0] == path
            k = a - theirs[1]
            assert k >= 0 and b - theirs[1] < len(theirs[2])
            expanded += theirs[2][k : k + b - a + 1]
    assert expanded == lines, (text, lines)


_ECHO = re.compile(
    r"^\[filecache\] lines? (\d+)(?:-(\d+))?: this edit's new text, as in your call", re.M
)


def _inputs(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        b["id"]: b["input"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    }


def check_echo(
    world: World,
    original: list[dict[str, Any]],
    sent: list[dict[str, Any]],
    cid: str,
    recorded: str,
    text: str,
) -> None:
    """An edit's snippet sent with its new text's rows named: the call's input is sent as
    written, and putting its new text back (numbered as the host numbers rows) at the lines
    named gives the result the host returned, byte for byte."""
    assert _inputs(sent)[cid] == _inputs(original)[cid]
    new = _inputs(sent)[cid]["new_string"]
    assert new == world.snippets[cid]
    found = _ECHO.search(text)
    assert found is not None
    first, added = int(found[1]), new.split("\n")
    assert int(found[2] or found[1]) == first + len(added) - 1
    rows = "\n".join(f"{n:>6}→{t}" for n, t in enumerate(added, first))
    end = text.find("\n", found.start())
    end = len(text) if end < 0 else end
    assert text[: found.start()] + rows + text[end:] == recorded


def check_request(world: World, original: list[dict[str, Any]], sent: list[dict[str, Any]]) -> None:
    assert _ids(sent) == _ids(original)
    before, after = _results(original), _results(sent)
    for cid, text in after.items():
        if text == before[cid] or text.startswith("[cleared tool result"):
            continue
        if cid in world.snippets and _ECHO.search(text):
            check_echo(world, original, sent, cid, before[cid], text)
            continue
        head = text.split("\n", 1)[0]
        if " as read): use" in head or " since your results " in head:
            check_several(world, before, after, cid, text)
            continue
        ref, diff = _REF.match(text), _DIFF.match(text)
        assert ref or diff, text
        found = ref or diff
        assert found is not None
        path, base, first = found[1], found[2], int(found[3])
        last = int(found[4] or first)
        assert base in after and after[base] == before[base]  # present, sent as content
        assert cid in world.shows and base in world.shows
        mine, theirs = world.shows[cid], world.shows[base]
        assert path == mine[0]
        assert (first, last) == (mine[1], mine[1] + len(mine[2]) - 1)
        if ref:
            k = first - theirs[1]
            assert k >= 0 and theirs[2][k : k + len(mine[2])] == mine[2]
        else:
            body = text.split("\n", 1)[1].rsplit("\n(Apply this diff", 1)[0] + "\n"
            assert theirs[1] == mine[1]
            assert _apply(body, theirs) == mine[2]


@settings(max_examples=EXAMPLES)
@given(
    conversations(), st.sampled_from([2_000, 8_000, 200_000]), st.sampled_from(["cost", "context"])
)
def test_references_hold_and_bytes_are_stable(world: World, window: int, preset: str) -> None:
    memory = open_memory(":memory:")
    policy = GatewayPolicy(context_window=window, prune_preset=preset)
    first_sent: dict[str, str] = {}
    pruned: dict[str, str] = {}
    try:
        for k in range(2, len(world.messages) + 1, 2):
            if world.messages[k - 1]["role"] != "user":
                continue
            original = world.messages[:k]
            body = _request(original)
            rewrite = rewrite_request("anthropic-messages", body, memory=memory, policy=policy)
            sent = json.loads(rewrite.body)["messages"] if rewrite.changed else original
            if not rewrite.changed:
                assert rewrite.body is body
            check_request(world, original, sent)
            for cid, text in _results(sent).items():
                if cid in pruned:
                    assert text == pruned[cid]  # sticky
                elif text.startswith("[cleared tool result"):
                    pruned[cid] = text
                else:
                    assert first_sent.setdefault(cid, text) == text  # prefix-stable
            for a, b in zip(original, sent, strict=True):
                if a["role"] == "assistant" or not isinstance(a["content"], list):
                    assert a == b
    finally:
        memory.close()


@settings(max_examples=PREFIX_EXAMPLES)
@given(conversations())
def test_without_memory_the_delta_is_a_function_of_the_prefix(world: World) -> None:
    seen: dict[str, str] = {}
    for k in range(2, len(world.messages) + 1, 2):
        original = world.messages[:k]
        rewrite = rewrite_request("anthropic-messages", _request(original))
        sent = json.loads(rewrite.body)["messages"] if rewrite.changed else original
        check_request(world, original, sent)
        for cid, text in _results(sent).items():
            assert seen.setdefault(cid, text) == text


@settings(max_examples=EXAMPLES)
@given(conversations())
def test_edit_echoes_give_back_the_snippet(world: World) -> None:
    """Every edit snippet sent with its new text named gives back the host's bytes, with the
    call's input as written (``check_echo``); at least the long ones are named."""
    original = world.messages
    rewrite = rewrite_request("anthropic-messages", _request(original))
    sent = json.loads(rewrite.body)["messages"] if rewrite.changed else original
    check_request(world, original, sent)
    after = _results(sent)
    for cid, new in world.snippets.items():
        if len(new) >= 400 and new.count("\n") >= 2:
            assert _ECHO.search(after[cid]), after[cid]


KEYS = st.sampled_from(["messages", "input", "role", "content", "type", "id", "tool_use_id"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(KEYS, c, max_size=4),
    max_leaves=20,
).map(lambda v: json.dumps(v).encode())
APIS = st.sampled_from(["anthropic-messages", "openai-chat", "openai-responses", "nope"])


@settings(max_examples=GARBAGE_EXAMPLES)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode), JSON), APIS)
def test_garbage_passes_through_and_never_raises(body: bytes, api: str) -> None:
    rewrite = rewrite_request(api, body, memory=None)
    assert not rewrite.changed and rewrite.body is body and rewrite.passthrough
