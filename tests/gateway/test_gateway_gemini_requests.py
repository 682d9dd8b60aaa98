"""The transform on Gemini API requests: a recorded Gemini CLI 0.61 request, requests it cannot
parse (byte-identical), and its invariants over generated Gemini CLI conversations (hypothesis).

The generated conversations are Gemini CLI's own shapes (``read_file`` whole, or with
``start_line``/``end_line`` and its truncation header; ``run_shell_command`` ``cat`` inside
``<untrusted_context>``; ``replace``; ``write_file``), each result recorded by the generator
(path, first line, lines shown): the oracle, never the transform's parser.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unidiff import PatchSet

from filecache.gateway import Api, GatewayPolicy, api_for_path, open_memory, rewrite_request

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "gateway"
EXAMPLES = max(30, int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")) // 8)
WORDS = ("alpha", "beta", "gamma", "delta", "omega", "theta", "kappa", "sigma")
CWD = "/work/p"
SYSTEM = {"parts": [{"text": "You are Gemini CLI."}]}
TOOLS = [{"functionDeclarations": [{"name": "read_file"}, {"name": "run_shell_command"}]}]
HEADER = (
    "\nIMPORTANT: The file content has been truncated.\nStatus: Showing lines {a}-{b} of {n} "
    "total lines.\nAction: To read more of the file, you can use the 'start_line' and "
    "'end_line' parameters in a subsequent 'read_file' call. For example, to read the next "
    "section of the file, use start_line: {c}.\n\n--- FILE CONTENT (truncated) ---\n"
)
SHELL = "<untrusted_context>\nOutput: {out}\nProcess Group PGID: 4242\n</untrusted_context>"


def body_of(contents: list[Any], **extra: Any) -> bytes:
    payload = {"contents": contents, "systemInstruction": SYSTEM, "tools": TOOLS,
               "generationConfig": {"temperature": 1}, **extra}  # fmt: skip
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def test_gemini_paths_speak_the_gemini_api() -> None:
    speaking = (
        "/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse",
        "/v1beta/models/gemini-3.5-flash-lite:generateContent",
        "/v1/models/m:generateContent",
    )
    for path in speaking:
        assert api_for_path(path) == Api.GEMINI
    for path in ("/v1beta/models/m:countTokens", "/v1beta/models", "/v1beta/models/a/b:x"):
        assert api_for_path(path) is None


def test_a_recorded_gemini_cli_request_gets_filerefs_and_keeps_everything_else() -> None:
    raw = (FIXTURES / "gemini-cli-0.61-reads.json").read_bytes()
    given_body = json.loads(raw)
    rewrite = rewrite_request(Api.GEMINI, raw, memory=open_memory(":memory:"))
    assert rewrite.changed and rewrite.counts.file_refs >= 2, rewrite
    sent = json.loads(rewrite.body)
    assert list(sent) == list(given_body)
    for key in ("systemInstruction", "tools", "generationConfig"):
        assert sent[key] == given_body[key]
    assert rewrite.body.count(b'"thoughtSignature":"skip_thought_signature_validator"') == (
        raw.count(b'"thoughtSignature":"skip_thought_signature_validator"')
    )  # fmt: skip
    changed = []
    for k, (a, b) in enumerate(zip(sent["contents"], given_body["contents"], strict=True)):
        if a != b:
            changed.append(k)
            for pa, pb in zip(a["parts"], b["parts"], strict=True):
                fa, fb = pa.get("functionResponse"), pb.get("functionResponse")
                assert pa.keys() == pb.keys() and fa["id"] == fb["id"] and fa["name"] == fb["name"]
    outputs = {
        p["functionResponse"]["id"]: p["functionResponse"]["response"].get("output", "")
        for c in sent["contents"] for p in c["parts"] if "functionResponse" in p
    }  # fmt: skip
    assert outputs["c001"].startswith("[filecache] ") and "since your result r1 " in outputs["c001"]
    assert (
        outputs["r1"]
        == [  # the base stays content, as Gemini CLI sent it
            p["functionResponse"]["response"]["output"] for p in given_body["contents"][2]["parts"]
        ][0]
    )
    assert changed and all(given_body["contents"][k]["role"] == "user" for k in changed)


BROKEN: list[Any] = [
    [{"role": "user", "parts": "not a list"}],
    [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": [1]}}]}],
    [{"role": "user", "parts": [{"functionResponse": {"name": "f", "id": "x",
                                                      "response": {"output": "y" * 500}}}]}],
    [{"role": "model", "parts": [{"functionCall": {"name": "f", "id": "a"}}]},
     {"role": "user", "parts": [{"functionResponse": {"name": "f", "id": "a",
                                                      "response": {"output": "x"}}},
                                {"functionResponse": {"name": "f", "id": "a",
                                                      "response": {"output": "x"}}}]}],
    [42],
    "contents",
]  # fmt: skip


@pytest.mark.parametrize("contents", BROKEN)
def test_a_request_it_cannot_parse_goes_byte_identical(contents: Any) -> None:
    raw = body_of(contents)
    rewrite = rewrite_request(Api.GEMINI, raw, memory=open_memory(":memory:"))
    assert not rewrite.changed and rewrite.body is raw and rewrite.passthrough


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=EXAMPLES * 4, deadline=None)
@given(st.lists(JSON, max_size=4))
def test_garbage_contents_go_byte_identical_or_change_only_result_texts(junk: list[Any]) -> None:
    raw = body_of(junk)
    rewrite = rewrite_request(Api.GEMINI, raw, memory=open_memory(":memory:"))
    assert rewrite.body is raw or rewrite.changed
    assert not rewrite.changed  # nothing here reads a file: never rewritten


# -- generated Gemini CLI conversations ----------------------------------------------------------


def line_text(draw: Any) -> str:
    return "    " + " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=3, max_size=6)))


@dataclass
class World:
    files: dict[str, list[str]]
    contents: list[dict[str, Any]] = field(default_factory=list)
    shows: dict[str, tuple[str, int, list[str]]] = field(default_factory=dict)
    n: int = 0


def _turn(world: World, name: str, args: dict[str, Any], output: str) -> str:
    world.n += 1
    cid = f"{name}_17966443{world.n:05d}_0"
    world.contents.append({"role": "model", "parts": [
        {"functionCall": {"id": cid, "args": args, "name": name},
         "thoughtSignature": "skip_thought_signature_validator"}]})  # fmt: skip
    world.contents.append(
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": name, "response": {"output": output}, "id": cid}}
            ],
        }
    )
    return cid


@st.composite
def conversations(draw: Any) -> World:
    files = {p: [line_text(draw) for _ in range(draw(st.integers(30, 90)))] for p in ("a", "b")}
    world = World(files)
    context = f"<session_context>\n- **Workspace Directories:**\n  - {CWD}\n</session_context>"
    world.contents.append({"role": "user", "parts": [{"text": context}, {"text": "tidy"}]})
    for _ in range(draw(st.integers(2, 12))):
        op = draw(st.sampled_from(["read", "read", "range", "cat", "edit", "edit", "write"]))
        name = draw(st.sampled_from(["a", "b"]))
        path = f"{CWD}/{name}.py"
        lines = world.files[name]
        shown_all = [*lines, ""]  # Gemini CLI splits on newlines: a last, empty line
        if op == "read":
            cid = _turn(world, "read_file", {"file_path": path}, "\n".join(shown_all))
            world.shows[cid] = (path, 1, shown_all)
        elif op == "range":
            a = draw(st.integers(1, len(shown_all)))
            b = draw(st.integers(a, len(shown_all)))
            head = HEADER.format(a=a, b=b, n=len(shown_all), c=b + 1)
            text = head + "\n".join(shown_all[a - 1 : b])
            cid = _turn(world, "read_file", {"file_path": f"{name}.py", "start_line": a,
                                             "end_line": b}, text)  # fmt: skip
            world.shows[cid] = (path, a, shown_all[a - 1 : b])
        elif op == "cat":
            out = SHELL.format(out="\n".join(lines))  # the terminal drops the last newline
            cid = _turn(world, "run_shell_command", {"command": f"cat {name}.py"}, out)
            world.shows[cid] = (path, 1, list(lines))
        elif op == "edit":
            k = draw(st.integers(0, len(lines) - 1))
            new = line_text(draw)
            args = {"file_path": path, "old_string": lines[k], "new_string": new,
                    "instruction": "change it"}  # fmt: skip
            lines[k] = new
            _turn(world, "replace", args, f"Successfully modified file: {path} (1 replacements).")
        else:
            world.files[name] = [line_text(draw) for _ in range(draw(st.integers(30, 90)))]
            content = "\n".join(world.files[name]) + "\n"
            _turn(world, "write_file", {"file_path": path, "content": content},
                  f"Successfully overwrote file: {path}.")  # fmt: skip
    return world


_HEAD = re.compile(
    r"\[filecache\] (\S+) (unchanged|changed) since your results? (\S+(?: and \S+)*) \("
    r"(lines?) ([-\d ]+(?: and [-\d]+)*) (as shown there|now)(?:: ([^;)]*))?"
    r"(?:; lines? ([-\d]+(?: and [-\d]+)*) (?:is|are) below, as read)?\)"
)


def _spans(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b or a)) for a, b in re.findall(r"(\d+)(?:-(\d+))?", text)]


def _outputs(contents: list[Any]) -> dict[str, str]:
    return {
        p["functionResponse"]["id"]: p["functionResponse"]["response"]["output"]
        for c in contents for p in c["parts"] if "functionResponse" in p
    }  # fmt: skip


def _line(show: tuple[str, int, list[str]], n: int) -> str:
    _, start, lines = show
    assert start <= n < start + len(lines), (n, start, len(lines))
    return lines[n - start]


def _check_reference(world: World, sent: dict[str, str], cid: str, text: str) -> None:
    found = _HEAD.search(text)
    assert found is not None, text
    bases = found[3].split(" and ")
    order = list(sent)
    for base in bases:  # present, before it, as content
        assert base in sent and order.index(base) < order.index(cid), (cid, base)
        assert "[filecache]" not in sent[base] and "[cleared" not in sent[base]
    mine = world.shows[cid]
    if found[2] == "changed":
        diff = text[text.index("\n") + 1 :]
        diff = diff[: diff.index("\n(Apply")] + "\n"
        base_show = world.shows[bases[0]]
        out = list(base_show[2])
        offset = 0
        for hunk in PatchSet(diff)[0]:
            at = hunk.source_start - base_show[1] + offset - (0 if hunk.source_length else -1)
            old = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_removed]
            new = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_added]
            assert out[at : at + len(old)] == old
            out[at : at + len(old)] = new
            offset += len(new) - len(old)
        assert out == mine[2]
        return
    segments = []
    if found[7]:
        for part in found[7].split(", "):
            where, _, base = part.rpartition(" in ")
            segments += [(a, b, base) for a, b in _spans(where)]
    else:
        segments += [(a, b, bases[0]) for a, b in _spans(found[5])]
    for a, b, base in segments:
        for n in range(a, b + 1):
            assert _line(world.shows[base], n) == _line(mine, n), (cid, base, n)


@settings(max_examples=EXAMPLES, deadline=None)
@given(conversations(), st.booleans())
def test_every_reference_holds_and_repeats_in_later_requests(world: World, prune: bool) -> None:
    """Each request of a growing conversation: every FileRef names earlier content results of
    the same request that show exactly those lines, every diff applies to the named result's
    lines and gives this result's; without pruning, a result's bytes never change once sent."""
    memory = open_memory(":memory:")
    policy = GatewayPolicy(prune=prune, context_window=4000 if prune else 200_000)
    seen: dict[str, str] = {}
    for end in range(3, len(world.contents) + 1, 2):
        contents = world.contents[:end]
        raw = body_of(contents)
        rewrite = rewrite_request(Api.GEMINI, raw, memory=memory, policy=policy)
        sent_body = json.loads(rewrite.body)
        assert sent_body["systemInstruction"] == SYSTEM and sent_body["tools"] == TOOLS
        sent = _outputs(sent_body["contents"])
        assert list(sent) == list(_outputs(contents))
        for cid, text in sent.items():
            if "[filecache] " in text.split("\n", 2)[0] or text.startswith(
                "<untrusted_context>\nOutput: [filecache]"
            ):
                _check_reference(world, sent, cid, text)
            if not prune:
                assert seen.setdefault(cid, text) == text, cid
        for a, b in zip(sent_body["contents"], contents, strict=True):
            if a != b:  # only function responses' outputs differ
                assert a["role"] == "user" and len(a["parts"]) == len(b["parts"])


def test_the_hooks_fileref_in_an_error_keeps_the_result_it_names() -> None:
    """With filecache's Gemini CLI hooks installed too, a re-read reaches the request as the
    call's ``error`` naming an earlier result: pruning never leaves it naming a cleared one."""
    big = "".join(
        f"big line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(300)
    )
    world = World({})
    world.contents.append({"role": "user", "parts": [{"text": "go"}]})
    first = _turn(world, "read_file", {"file_path": "/p/big.txt"}, big)
    hook = f"[filecache] big.txt unchanged since your result {first} (301 lines, xxh3:ab12): ..."
    world.n += 1
    world.contents += [
        {"role": "model", "parts": [{"functionCall": {"id": "h1", "name": "read_file",
                                                      "args": {"file_path": "/p/big.txt"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "h1", "name": "read_file",
                                                         "response": {"error": hook}}}]},
    ]  # fmt: skip
    for i in range(6):
        out = SHELL.format(out="\n".join(map(str, range(1, 300 + i))))
        _turn(world, "run_shell_command", {"command": f"seq 1 {300 + i}"}, out)
    for again in (False, True):  # a later read of the file supersedes the first one
        contents = list(world.contents)
        if again:
            contents += [
                {"role": "model", "parts": [{"functionCall": {
                    "id": "r9", "name": "read_file", "args": {"file_path": "/p/big.txt"}}}]},
                {"role": "user", "parts": [{"functionResponse": {
                    "id": "r9", "name": "read_file", "response": {"output": big.upper()}}}]},
            ]  # fmt: skip
        rewrite = rewrite_request(
            Api.GEMINI, body_of(contents), memory=open_memory(":memory:"),
            policy=GatewayPolicy(context_window=2000),
        )  # fmt: skip
        assert rewrite.changed and rewrite.counts.pruned, rewrite
        sent = json.loads(rewrite.body)["contents"]
        texts = {
            p["functionResponse"]["id"]: next(iter(p["functionResponse"]["response"].values()))
            for c in sent for p in c["parts"] if "functionResponse" in p
        }  # fmt: skip
        if texts["h1"] == hook:  # still a reference: its base is content
            assert texts[first] == big
        else:
            assert texts["h1"].startswith("[cleared tool result")
