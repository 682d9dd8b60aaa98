"""The gateway transform's invariants over generated conversations (hypothesis).

A conversation grows one turn at a time: each turn is a Claude Code tool call on a small set of
files (``Read`` with or without a range, ``Edit``, ``Write``, Bash ``cat`` and ``sed -n``), its
result as Claude Code shows it. Every request (all messages so far) goes through
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


@dataclass
class World:
    files: dict[str, list[str]]
    messages: list[dict[str, Any]] = field(default_factory=list)
    shows: dict[str, tuple[str, int, list[str]]] = field(default_factory=dict)
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


@st.composite
def conversations(draw: Any) -> World:
    files = {p: [line_text(draw) for _ in range(draw(st.integers(8, 60)))] for p in PATHS[:2]}
    world = World(files)
    world.messages.append({"role": "user", "content": "tidy the files"})
    for _ in range(draw(st.integers(2, 14))):
        op = draw(st.sampled_from(["read", "read", "range", "cat", "sed", "edit", "edit", "write"]))
        path = draw(st.sampled_from(PATHS[:2]))
        lines = world.files[path]
        if op in ("read", "range", "cat", "sed"):
            start, end = 1, len(lines)
            args: dict[str, Any] = {"file_path": f"/p/{path}"}
            if op in ("range", "sed"):
                start = draw(st.integers(1, len(lines)))
                end = draw(st.integers(start, len(lines)))
            if op == "range":
                args |= {"offset": start, "limit": end - start + 1}
            shown = lines[start - 1 : end]
            if op in ("read", "range"):
                text = "\n".join(f"{n:>6}→{t}" for n, t in enumerate(shown, start))
                if draw(st.booleans()):
                    text += (
                        "\n\n<system-reminder>\nWhenever you read a file...\n</system-reminder>\n"
                    )
                cid = _turn(world, "Read", args, text)
            else:
                command = f"cat {path}" if op == "cat" else f"sed -n {start},{end}p {path}"
                cid = _turn(world, "Bash", {"command": command}, "\n".join(shown))
            world.shows[cid] = (f"/p/{path}", start, list(shown))
        elif op == "edit":
            k = draw(st.integers(0, len(lines) - 1))
            added = [line_text(draw) for _ in range(draw(st.integers(1, 12)))]
            new = "\n".join(added)
            args = {"file_path": f"/p/{path}", "old_string": lines[k], "new_string": new}
            lines[k : k + 1] = added
            if draw(st.booleans()):  # Claude Code before 2.x: a snippet around the edit
                first = max(0, k - draw(st.integers(0, 4)))
                last = min(len(lines), k + len(added) + draw(st.integers(0, 4)))
                rows = "\n".join(f"{n:>6}→{t}" for n, t in enumerate(lines[first:last], first + 1))
                text = (
                    f"The file /p/{path} has been updated. Here's the result of running `cat -n` "
                    f"on a snippet of the edited file:\n{rows}"
                )
                cid = _turn(world, "Edit", args, text)
                world.snippets[cid] = new
            else:
                _turn(world, "Edit", args, f"The file /p/{path} has been updated successfully.")
        else:
            world.files[path] = [line_text(draw) for _ in range(draw(st.integers(8, 60)))]
            content = "\n".join(world.files[path]) + "\n"
            _turn(world, "Write", {"file_path": f"/p/{path}", "content": content},
                  f"File created successfully at: /p/{path}")  # fmt: skip
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
    if world.messages and cid in world.shows and "→" in text:
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
