"""filecache.gateway.transform: requests of the three APIs in, requests out (real stores, real
codecs; the shapes are those of tests/gateway/test_gateway_shown.py)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from filecache.gateway import (
    Api,
    GatewayPolicy,
    open_memory,
    rewrite_payload,
    rewrite_request,
)
from filecache.gateway.delta import plan_delta
from filecache.gateway.transform import _keep_references_whole
from filecache.prune.codecs.base import codec_for

LINES = [f"    value_{i} = compute({i}, 'the quick brown fox')  # ünïcode" for i in range(1, 61)]


def arrows(lines: list[str], start: int = 1) -> str:
    return "\n".join(f"{n:>6}→{t}" for n, t in enumerate(lines, start))


def tool_turn(cid: str, name: str, args: dict[str, Any], result: Any) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": cid, "name": name, "input": args}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": cid, "content": result}],
        },
    ]


def anthropic(messages: list[dict[str, Any]], **extra: Any) -> bytes:
    payload = {
        "model": "claude-x",
        "system": "Working directory: /p",
        "messages": messages,
        "metadata": {"user_id": "user_ab_account_cd_session_0f1e2d3c-4b5a"},
        **extra,
    }
    return json.dumps(payload, ensure_ascii=False).encode()


def results_of(body: bytes) -> dict[str, Any]:
    out = {}
    for message in json.loads(body)["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block["type"] == "tool_result":
                    out[block["tool_use_id"]] = block
    return out


def test_an_unchanged_re_read_names_the_earlier_result_and_keeps_everything_else() -> None:
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    messages += tool_turn("toolu_2", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    body = anthropic(messages, zz_unknown={"kept": "é"}, stream=True)
    rewrite = rewrite_request("anthropic-messages", body)
    assert rewrite.changed and rewrite.counts.file_refs == 1
    sent = json.loads(rewrite.body)
    assert list(sent) == list(json.loads(body))  # key order, unknown fields kept
    assert sent["zz_unknown"] == {"kept": "é"} and "é".encode() in rewrite.body  # not \\u escaped
    results = results_of(rewrite.body)
    assert results["toolu_1"]["content"] == arrows(LINES)
    ref = results["toolu_2"]["content"]
    assert ref.startswith("[filecache] /p/a.py unchanged since your result toolu_1 (lines 1-60")
    assert "read the file again" in ref
    assert sent["messages"][:4] == json.loads(body)["messages"][:4]


def test_a_changed_file_arrives_as_a_diff_and_a_re_read_after_it_as_content() -> None:
    changed = list(LINES)
    changed[29] = "    value_30 = 'edited'"
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    messages += tool_turn(
        "toolu_2",
        "Edit",
        {"file_path": "/p/a.py", "old_string": "x", "new_string": "y"},
        "The file /p/a.py has been updated successfully.",
    )
    messages += tool_turn("toolu_3", "Read", {"file_path": "/p/a.py"}, arrows(changed))
    messages += tool_turn("toolu_4", "Read", {"file_path": "/p/a.py"}, arrows(changed))
    results = results_of(rewrite_request("anthropic-messages", anthropic(messages)).body)
    diff = results["toolu_3"]["content"]
    assert diff.startswith("[filecache] /p/a.py changed since your result toolu_1 (lines 1-60")
    assert "-    value_30 = compute(30" in diff and "+    value_30 = 'edited'" in diff
    assert results["toolu_4"]["content"] == arrows(changed)  # the way out: it read again


def test_no_reference_to_a_result_the_request_lacks() -> None:
    """After the host compacts, the earlier read is gone: the re-read stays content."""
    messages = [{"role": "user", "content": "summary of the earlier conversation"}]
    messages += tool_turn("toolu_9", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    rewrite = rewrite_request("anthropic-messages", anthropic(messages))
    assert not rewrite.changed


def test_a_partial_re_read_inside_a_whole_read_is_a_file_ref_with_its_range() -> None:
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    messages += tool_turn(
        "toolu_2",
        "Read",
        {"file_path": "/p/a.py", "offset": 11, "limit": 30},
        arrows(LINES[10:40], 11) + "\n\n<system-reminder>\nA note.\n</system-reminder>\n",
    )
    ref = results_of(rewrite_request("anthropic-messages", anthropic(messages)).body)["toolu_2"]
    text = ref["content"]
    assert text.startswith("[filecache] /p/a.py unchanged since your result toolu_1 (lines 11-40")
    assert text.endswith("<system-reminder>\nA note.\n</system-reminder>\n")  # the host's note


def test_images_thinking_and_cache_control_pass_through() -> None:
    image = [
        {"type": "text", "text": arrows(LINES)},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
    ]
    thinking = {"type": "thinking", "thinking": "read it", "signature": "c2lnbmF0dXJl"}
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    messages += tool_turn("toolu_2", "Read", {"file_path": "/p/a.py"}, image)
    messages += tool_turn("toolu_3", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    messages[-2]["content"].insert(0, thinking)
    messages[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    system = [
        {"type": "text", "text": "Working directory: /p", "cache_control": {"type": "ephemeral"}}
    ]
    body = anthropic(messages, system=system, tools=[{"name": "Read", "input_schema": {}}])
    rewrite = rewrite_request("anthropic-messages", body)
    sent = json.loads(rewrite.body)
    given = json.loads(body)
    assert sent["system"] == given["system"] and sent["tools"] == given["tools"]
    assert sent["messages"][5] == given["messages"][5]  # the thinking block and its signature
    results = results_of(rewrite.body)
    assert results["toolu_2"]["content"] == image
    assert results["toolu_3"]["cache_control"] == {"type": "ephemeral"}
    assert results["toolu_3"]["content"].startswith("[filecache] /p/a.py unchanged")
    assert rewrite.counts.untouched_blocks == 4  # system, tool, image, thinking


def test_openai_chat_swe_agent_views() -> None:
    view = "Here's the result of running `cat -n` on /testbed/a.py:\n" + "\n".join(
        f"{n:6d}\t{t}" for n, t in enumerate(LINES, 1)
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix"},
    ]
    for cid in ("call_1", "call_2"):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": "a.py"}),
                        },
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": cid, "content": view})
    payload = {"model": "gpt-x", "messages": messages, "prompt_cache_key": "conv-1"}
    new, rewrite = rewrite_payload(Api.OPENAI_CHAT, payload)
    assert rewrite.changed and rewrite.body == b""
    assert new["messages"][:5] == messages[:5]
    assert new["messages"][5]["content"].startswith(
        "Here's the result of running `cat -n` on /testbed/a.py:\n[filecache] a.py unchanged "
        "since your result call_1"
    )
    assert rewrite.conversation is not None and rewrite.conversation.startswith("cache-key:")
    same, nothing = rewrite_payload(Api.OPENAI_CHAT, {"model": "x", "messages": messages[:4]})
    assert same is not None and not nothing.changed and nothing.passthrough


def test_openai_responses_codex_shell_reads() -> None:
    output = "".join(f"{t}\n" for t in LINES)
    framed = (
        "Chunk ID: 9f\nWall time: 0.0010 seconds\nProcess exited with code 0\n"
        f"Original token count: 900\nOutput:\n{output}"
    )
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "<environment_context><cwd>/w</cwd></environment_context>",
                }
            ],
        },
    ]
    for cid, cmd in (("call_a", "cat notes.txt"), ("call_b", "cat /w/notes.txt")):
        items.append(
            {"type": "reasoning", "id": f"rs_{cid}", "summary": [], "encrypted_content": "gAAAA"}
        )
        items.append(
            {
                "type": "function_call",
                "call_id": cid,
                "name": "exec_command",
                "arguments": json.dumps({"cmd": cmd}),
            }
        )
        items.append({"type": "function_call_output", "call_id": cid, "output": framed})
    body = json.dumps({"model": "gpt-5", "input": items, "prompt_cache_key": "c"}).encode()
    rewrite = rewrite_request(Api.OPENAI_RESPONSES, body)
    sent = json.loads(rewrite.body)["input"]
    assert sent[:6] == items[:6]
    assert sent[6]["output"].startswith(
        "Chunk ID: 9f\nWall time: 0.0010 seconds\nProcess exited with code 0\n"
        "Original token count: 900\nOutput:\n[filecache] /w/notes.txt unchanged since your "
        "result call_a"
    )


def test_a_claude_code_stub_pins_its_read_against_pruning(tmp_path: Path) -> None:
    stub = (
        "File unchanged since last read. The content from the earlier Read tool_result in "
        "this conversation is still current \u2014 refer to that instead of re-reading."
    )
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    messages += tool_turn("toolu_2", "Read", {"file_path": "/p/a.py"}, stub)
    for k in range(3, 12):  # old bulky output the context preset clears
        messages += tool_turn(f"toolu_{k}", "Bash", {"command": f"pytest -k t{k}"}, "x " * 800)
    memory = open_memory(str(tmp_path / "gw.db"))
    policy = GatewayPolicy(context_window=8_000, prune_preset="context")
    try:
        rewrite = rewrite_request(
            "anthropic-messages", anthropic(messages), memory=memory, policy=policy
        )
    finally:
        memory.close()
    results = results_of(rewrite.body)
    assert rewrite.counts.pruned > 0
    assert results["toolu_1"]["content"] == arrows(LINES)  # the stub relies on it
    assert results["toolu_2"]["content"] == stub


def test_pruned_bytes_repeat_from_the_store_in_a_new_process(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "look"}]
    for k in range(1, 12):
        messages += tool_turn(f"toolu_{k}", "Bash", {"command": f"pytest -k t{k}"}, "y " * 900)
    policy = GatewayPolicy(context_window=8_000, prune_preset="context")
    store = tmp_path / "gw.db"
    first = open_memory(str(store))
    a = rewrite_request("anthropic-messages", anthropic(messages[:9]), memory=first, policy=policy)
    first.close()
    assert a.counts.pruned > 0
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    second = open_memory(str(store))  # another process: only the store remembers
    b = rewrite_request("anthropic-messages", anthropic(messages), memory=second, policy=policy)
    second.close()
    before, after = results_of(a.body), results_of(b.body)
    for cid, block in before.items():
        if block["content"].startswith("[cleared tool result"):
            assert after[cid] == block


def test_a_denied_file_is_never_referred_to_nor_stored(tmp_path: Path) -> None:
    secret = [f"API_TOKEN_{i}=s3cr3t-{i:04d}-abcdefghijklmnopqrstuvwxyz" for i in range(40)]
    changed = list(secret)
    changed[3] = "API_TOKEN_3=rotated-zzzzzzzzzzzzzzzzzzzzzzzz"
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/.env"}, arrows(secret))
    messages += tool_turn("toolu_2", "Read", {"file_path": "/p/.env"}, arrows(changed))
    messages += tool_turn("toolu_3", "Bash", {"command": "cat .env"}, "\n".join(secret))
    memory = open_memory(str(tmp_path / "gw.db"))
    try:
        rewrite = rewrite_request("anthropic-messages", anthropic(messages), memory=memory)
    finally:
        memory.close()
    assert not rewrite.changed
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"s3cr3t" not in stored and b"rotated" not in stored


def test_a_file_holding_a_private_key_is_denied_by_content_whatever_its_name(
    tmp_path: Path,
) -> None:
    """The store denies a private key by content, not only by name; so does the gateway: a
    re-read of ``notes.txt`` holding a PEM key is never a FileRef, and nothing of it is kept."""
    body = ["-----BEGIN RSA PRIVATE KEY-----"]
    body += [f"MIIEpAIBAAKCAQEA{i:04d}q8k2Zs9fLwXyPrivKeyMaterialLine" for i in range(40)]
    body += ["-----END RSA PRIVATE KEY-----"]
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/notes.txt"}, arrows(body))
    messages += tool_turn("toolu_2", "Read", {"file_path": "/p/notes.txt"}, arrows(body))
    messages += tool_turn("toolu_3", "Bash", {"command": "cat notes.txt"}, "\n".join(body))
    memory = open_memory(str(tmp_path / "gw.db"))
    try:
        rewrite = rewrite_request("anthropic-messages", anthropic(messages), memory=memory)
    finally:
        memory.close()
    assert not rewrite.changed
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"PrivKeyMaterial" not in stored


def test_filecache_answers_in_the_request_are_content_and_keep_what_they_name(
    tmp_path: Path,
) -> None:
    """A read served by filecache itself (the hook, MCP): its content answer is content to
    refer to; its FileRef keeps the result it names alive through pruning."""
    header = "[/p/a.py: 60 lines, xxh3 3c2e1be1]\n"
    numbered = header + "\n".join(f"{n}\t{t}" for n, t in enumerate(LINES, 1)) + "\n"
    hook_ref = "[filecache] /p/a.py unchanged since your result toolu_1 (60 lines, 3c2e1be1)\n"
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, numbered)
    for k in range(2, 10):
        messages += tool_turn(f"toolu_{k}", "Bash", {"command": f"pytest -k t{k}"}, "z " * 900)
    messages += tool_turn("toolu_10", "Read", {"file_path": "/p/a.py"}, hook_ref)
    messages += tool_turn(
        "toolu_11",
        "Read",
        {"file_path": "/p/a.py", "offset": 5, "limit": 20},
        header + "\n".join(f"{n}\t{t}" for n, t in enumerate(LINES[4:24], 5)),
    )
    memory = open_memory(str(tmp_path / "gw.db"))
    policy = GatewayPolicy(context_window=8_000, prune_preset="context")
    try:
        rewrite = rewrite_request(
            "anthropic-messages", anthropic(messages), memory=memory, policy=policy
        )
    finally:
        memory.close()
    results = results_of(rewrite.body)
    assert rewrite.counts.pruned > 0
    assert results["toolu_1"]["content"] == numbered  # named by the hook's FileRef
    assert results["toolu_10"]["content"] == hook_ref
    assert results["toolu_11"]["content"].startswith(
        "[/p/a.py: 60 lines, xxh3 3c2e1be1]\n[filecache] /p/a.py unchanged since your result "
        "toolu_1 (lines 5-24"
    )


def test_threads_sharing_one_memory_send_what_one_thread_sends(tmp_path: Path) -> None:
    """A server's request threads share the memory and the memos: the bytes do not depend on
    which thread saw a message first."""
    import threading

    changed = list(LINES)
    changed[7] = "    value_8 = 'edited'"
    messages = [{"role": "user", "content": "look"}]
    for k in range(1, 13):
        lines = changed if k > 6 else LINES
        messages += tool_turn(
            f"toolu_{k}", "Read", {"file_path": f"/p/{'ab'[k % 2]}.py"}, arrows(lines)
        )
    bodies = [anthropic(messages[:k]) for k in range(3, len(messages) + 1, 2)]
    alone = [rewrite_request("anthropic-messages", b).body for b in bodies]
    memory = open_memory(str(tmp_path / "gw.db"))
    out: dict[tuple[int, int], bytes] = {}
    # FileRefs and diffs only: which cut pruning makes depends on the order requests come in
    delta = GatewayPolicy(prune=False)

    def worker(n: int) -> None:
        for i, body in enumerate(bodies if n % 2 else reversed(bodies)):
            j = i if n % 2 else len(bodies) - 1 - i
            found = rewrite_request("anthropic-messages", body, memory=memory, policy=delta)
            out[(n, j)] = found.body

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    memory.close()
    assert len(out) == 4 * len(bodies)
    for (_, j), body in out.items():
        assert results_of(body) == results_of(alone[j])


def _edited(k: int) -> list[str]:
    changed = list(LINES)
    changed[k - 1] = f"    value_{k} = 'edited'"
    return changed


EDIT = {"file_path": "/p/a.py", "old_string": "x", "new_string": "y"}
EDITED = "The file /p/a.py has been updated successfully."


def test_a_whole_re_read_after_a_ranged_one_names_the_first_read() -> None:
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    ranged = {"file_path": "/p/a.py", "offset": 11, "limit": 30}
    messages += tool_turn("toolu_2", "Read", ranged, arrows(LINES[10:40], 11))
    messages += tool_turn("toolu_3", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    results = results_of(rewrite_request("anthropic-messages", anthropic(messages)).body)
    assert results["toolu_2"]["content"].startswith(
        "[filecache] /p/a.py unchanged since your result toolu_1 (lines 11-40 as shown there)"
    )
    assert results["toolu_3"]["content"].startswith(
        "[filecache] /p/a.py unchanged since your result toolu_1 (lines 1-60 as shown there)"
    )
    messages += tool_turn("toolu_4", "Read", ranged, arrows(LINES[10:40], 11))
    results = results_of(rewrite_request("anthropic-messages", anthropic(messages)).body)
    assert results["toolu_4"]["content"] == arrows(LINES[10:40], 11)  # inside toolu_3's lines


def test_a_ranged_re_read_after_a_diff_names_the_unchanged_lines_and_shows_the_changed() -> None:
    changed = _edited(30)
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    messages += tool_turn("toolu_2", "Edit", EDIT, EDITED)
    messages += tool_turn("toolu_3", "Read", {"file_path": "/p/a.py"}, arrows(changed))
    ranged = {"file_path": "/p/a.py", "offset": 11, "limit": 30}
    messages += tool_turn("toolu_4", "Read", ranged, arrows(changed[10:40], 11))
    results = results_of(rewrite_request("anthropic-messages", anthropic(messages)).body)
    assert results["toolu_3"]["content"].startswith("[filecache] /p/a.py changed since")
    assert results["toolu_4"]["content"] == (
        "[filecache] /p/a.py unchanged since your result toolu_1 (lines 11-29 and 31-40 as shown"
        " there; line 30 is below, as read): use that text; if it is no longer in your context,"
        " read the file again to get its text.\n"
        "    30→    value_30 = 'edited'\n"
    )


def test_lines_shown_by_two_earlier_results_name_both() -> None:
    changed = _edited(30)
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    messages += tool_turn("toolu_2", "Edit", EDIT, EDITED)
    part = {"file_path": "/p/a.py", "offset": 29, "limit": 3}
    messages += tool_turn("toolu_3", "Read", part, arrows(changed[28:31], 29))
    head = {"file_path": "/p/a.py", "offset": 1, "limit": 40}
    messages += tool_turn("toolu_4", "Read", head, arrows(changed[:40]))
    results = results_of(rewrite_request("anthropic-messages", anthropic(messages)).body)
    assert results["toolu_3"]["content"] == arrows(changed[28:31], 29)  # too short to win
    assert results["toolu_4"]["content"].startswith(
        "[filecache] /p/a.py unchanged since your results toolu_1 and toolu_3 (lines 1-40 as"
        " shown there: 1-29 and 32-40 in toolu_1, 30-31 in toolu_3): use that text;"
    )


def test_a_reference_to_several_results_is_content_once_one_of_them_is_gone() -> None:
    """Pruning keeps the first result a reference names; when it prunes another one, the
    reference goes back to the content (never a reference to a result the request lacks)."""
    changed = _edited(30)
    messages = [{"role": "user", "content": "look"}]
    messages += tool_turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES))
    messages += tool_turn("toolu_2", "Edit", EDIT, EDITED)
    part = {"file_path": "/p/a.py", "offset": 29, "limit": 3}
    messages += tool_turn("toolu_3", "Read", part, arrows(changed[28:31], 29))
    head = {"file_path": "/p/a.py", "offset": 1, "limit": 40}
    messages += tool_turn("toolu_4", "Read", head, arrows(changed[:40]))
    transcript = codec_for("anthropic").parse(messages)
    delta = plan_delta(transcript, cwd="/p")
    assert delta.bases["toolu_4"] == ("toolu_1", "toolu_3")
    replacements = dict(delta.sent) | {"toolu_3": "[cleared tool result]"}
    _keep_references_whole(replacements, delta, transcript.results_by_id())
    assert "toolu_4" not in replacements
