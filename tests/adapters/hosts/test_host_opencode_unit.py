"""The opencode host module without the binary: install, the read shape, the resident process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts import opencode
from filecache.adapters.hosts.base import HostSession, log_path
from filecache.adapters.hosts.opencode import PLUGIN, install, opencode_lines, parse_read, run_hook

from filecache.errors import ConfigError

OTHER = ["file:///home/u/other-plugin.js", {"x": 1}]


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "opencode" / "opencode.json"


def entry() -> list[object]:
    return [PLUGIN.as_uri(), {"python": sys.executable}]


def test_install_merges_with_the_users_config_and_is_idempotent(
    config_home: Path, tmp_path: Path
) -> None:
    config_home.parent.mkdir(parents=True)
    mine = {"model": "x/y", "plugin": [OTHER, "opencode-foo@1.0"], "provider": {"a": {}}}
    config_home.write_text(json.dumps(mine))
    line = install(scope=None, uninstall=False, cwd=tmp_path)
    assert line.startswith(f"installed filecache's plugin for opencode in {config_home}")
    once = json.loads(config_home.read_text())
    assert once == {**mine, "plugin": [OTHER, "opencode-foo@1.0", entry()]}
    assert Path(PLUGIN).is_absolute() and Path(sys.executable).is_absolute()
    install(scope="user", uninstall=False, cwd=tmp_path)
    assert json.loads(config_home.read_text()) == once  # idempotent
    assert install(scope=None, uninstall=True, cwd=tmp_path).startswith("removed")
    assert json.loads(config_home.read_text()) == mine
    assert "not installed" in install(scope=None, uninstall=True, cwd=tmp_path)


def test_an_older_installation_is_replaced_not_doubled(config_home: Path, tmp_path: Path) -> None:
    config_home.parent.mkdir(parents=True)
    old = ["file:///old/venv/lib/site-packages/filecache/adapters/hosts/opencode_plugin.js",
           {"python": "/old/venv/bin/python"}]  # fmt: skip
    config_home.write_text(json.dumps({"plugin": [old, OTHER]}))
    install(scope=None, uninstall=False, cwd=tmp_path)
    assert json.loads(config_home.read_text())["plugin"] == [OTHER, entry()]


SCHEMA = {"$schema": "https://opencode.ai/config.json"}


@pytest.mark.parametrize("mine", [None, {}, SCHEMA, {"plugin": []}, {"model": "x/y"}])
def test_uninstall_removes_only_the_entry_and_never_the_file(
    config_home: Path, tmp_path: Path, mine: dict[str, Any] | None
) -> None:
    """Install cannot tell at uninstall whether it made the file (or its "$schema" and its
    "plugin" list): those stay, the file is never deleted."""
    if mine is not None:
        config_home.parent.mkdir(parents=True)
        config_home.write_text(json.dumps(mine))
    install(scope=None, uninstall=False, cwd=tmp_path)
    assert json.loads(config_home.read_text())["plugin"] == [entry()]
    assert install(scope=None, uninstall=True, cwd=tmp_path).startswith("removed")
    after = json.loads(config_home.read_text())
    assert {k: v for k, v in after.items() if k in (mine or {})} == (mine or {})
    added = {k: v for k, v in after.items() if k not in (mine or {})}
    assert added in ({}, {"plugin": []}, SCHEMA, {**SCHEMA, "plugin": []})


def test_project_scope_writes_the_projects_dot_opencode(config_home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    line = install(scope="project", uninstall=False, cwd=project)
    path = project / ".opencode" / "opencode.json"
    assert str(path) in line and json.loads(path.read_text())["plugin"] == [entry()]
    assert not config_home.exists()


@pytest.mark.parametrize(
    ("text", "says"),
    [("{not json", "not valid JSON"), ('{"plugin": "x"}', '"plugin" list'), ("[1]", "object")],
)
def test_a_broken_config_is_refused_untouched(
    config_home: Path, tmp_path: Path, text: str, says: str
) -> None:
    config_home.parent.mkdir(parents=True)
    config_home.write_text(text)
    with pytest.raises(ConfigError, match=says):
        install(scope=None, uninstall=False, cwd=tmp_path)
    assert config_home.read_text() == text


def test_a_jsonc_config_is_not_rewritten(config_home: Path, tmp_path: Path) -> None:
    jsonc = config_home.with_suffix(".jsonc")
    jsonc.parent.mkdir(parents=True)
    jsonc.write_text('{\n  // mine\n  "plugin": []\n}\n')
    with pytest.raises(ConfigError, match="add this entry") as raised:
        install(scope=None, uninstall=False, cwd=tmp_path)
    assert PLUGIN.as_uri() in str(raised.value) and not config_home.exists()


def test_the_cli_installs(config_home: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "filecache", "install", "opencode"], cwd=tmp_path,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.count("\n") == 1 and str(config_home) in done.stdout
    assert json.loads(config_home.read_text())["plugin"] == [entry()]


# -- opencode's read shape -------------------------------------------------------------------------

HEAD = "<path>/p/a.txt</path>\n<type>file</type>\n<content>\n"


def test_a_read_result_is_parsed_and_its_lines_replaced() -> None:
    text = HEAD + "5: five\n6: \n7: (seven)\n\n(Showing lines 5-7 of 9. Use offset=8 to continue.)"
    text += "\n</content>\n\n<system-reminder>\nmore\n</system-reminder>"
    shown = parse_read(text)
    assert shown is not None and shown.path == "/p/a.txt"
    assert (shown.start, shown.end, shown.to_end) == (5, 7, False)
    assert shown.lines == ("five", "", "(seven)")
    replaced = shown.with_body("[filecache] a.txt unchanged since your result c1 (lines 5-7, ab)\n")
    assert replaced == text.replace("5: five\n6: \n7: (seven)", "[filecache] a.txt unchanged "
                                    "since your result c1 (lines 5-7, ab)")  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "<path>/p</path>\n<type>directory</type>\n<entries>\na\n</entries>",  # a directory
        "Image read successfully",
        HEAD + "1: a\n3: c\n\n(End of file - total 3 lines)\n</content>",  # numbers skip
        HEAD + "1: " + "x" * 2000 + "... (line truncated to 2000 chars)\n\n"
        "(End of file - total 1 lines)\n</content>",  # a cut line: the model lacks its end
        HEAD + "\n\n(End of file - total 0 lines)\n</content>",  # empty
        HEAD + "1: a\n\n(End of file - total 1 lines)\n</content>trailing",
    ],
)
def test_what_is_not_plain_lines_is_left_to_opencode(text: str) -> None:
    assert parse_read(text) is None


def test_lines_split_as_opencode_splits_them() -> None:
    assert opencode_lines("a\r\nb\rc\x0bd\n\ng") == ["a", "b", "c\x0bd", "", "g"]
    assert opencode_lines("x\n") == ["x"] and opencode_lines("") == []


# -- the requests ----------------------------------------------------------------------------------


def request(root: Path, op: str, **fields: object) -> bytes:
    return json.dumps({"id": 7, "op": op, "session": "ses_1", "root": str(root), **fields}).encode()


def opencode_read(path: Path, text: str) -> str:
    lines = opencode_lines(text)
    body = "\n".join(f"{n}: {line}" for n, line in enumerate(lines, 1))
    return (f"<path>{path}</path>\n<type>file</type>\n<content>\n{body}\n\n"
            f"(End of file - total {len(lines)} lines)\n</content>")  # fmt: skip


def test_one_shot_hook_answers_a_re_read_and_keeps_nothing_of_a_lost_result(
    root: Path, notes: str
) -> None:
    path = root / "notes.txt"
    shown = opencode_read(path, notes)
    first = json.loads(run_hook([], request(root, "read", call="c1", path=str(path), output=shown)))
    assert first == {"id": 7, "output": None}  # content: opencode's output stands
    again = json.loads(run_hook([], request(root, "read", call="c2", path=str(path), output=shown)))
    assert "unchanged since your result c1" in again["output"]
    assert again["output"].startswith(f"<path>{path}</path>\n<type>file</type>\n<content>\n")
    run_hook([], request(root, "keep", present=[]))  # compaction: the model lost c1
    third = json.loads(run_hook([], request(root, "read", call="c3", path=str(path), output=shown)))
    assert third["output"] is None


def test_a_short_answer_whose_base_is_gone_is_expanded_to_its_lines(root: Path, notes: str) -> None:
    """``expand``: the lines a FileRef or diff stood for, in read's shape (the same text each
    time it is asked); the call then backs nothing; a bash answer gets a placeholder."""
    path = root / "notes.txt"
    shown = opencode_read(path, notes)
    run_hook([], request(root, "read", call="c1", path=str(path), output=shown))
    ref = json.loads(run_hook([], request(root, "read", call="c2", path=str(path), output=shown)))
    assert "unchanged since your result c1" in ref["output"]
    for _ in range(2):
        expanded = json.loads(run_hook([], request(root, "expand", call="c2", tool="read",
                                                   output=ref["output"])))  # fmt: skip
        assert expanded["output"] == shown
    bash = "[filecache] notes.txt unchanged since your result c1 (60 lines, 0123abcd)"
    placeholder = json.loads(run_hook([], request(root, "expand", call="b9", tool="bash",
                                                  output=bash)))["output"]  # fmt: skip
    assert (
        placeholder.startswith("[cleared tool result: ") and "since your result" not in placeholder
    )
    run_hook([], request(root, "keep", present=["c2"]))  # c1 left the request; c2 is content now
    third = json.loads(run_hook([], request(root, "read", call="c3", path=str(path), output=shown)))
    assert third["output"] is None  # nothing of c1 or c2 is relied on: content


def test_a_ranged_answer_and_a_diff_expand_to_the_lines_they_stood_for(
    root: Path, notes: str
) -> None:
    path = root / "notes.txt"
    run_hook(
        [], request(root, "read", call="c1", path=str(path), output=opencode_read(path, notes))
    )
    lines = opencode_lines(notes)
    body = "\n".join(f"{n}: {lines[n - 1]}" for n in range(10, 50))
    ranged = (f"<path>{path}</path>\n<type>file</type>\n<content>\n{body}\n\n"
              "(Showing lines 10-49 of 60. Use offset=50 to continue.)\n</content>")  # fmt: skip
    ref = json.loads(run_hook([], request(root, "read", call="c2", path=str(path), output=ranged,
                                          offset=10, limit=40)))["output"]  # fmt: skip
    assert "unchanged since your result c1 (lines 10-49" in ref
    assert _expand(root, "c2", ref) == ranged
    changed = notes.replace("line 30:", "line 30 (changed):")
    path.write_text(changed)
    now = opencode_read(path, changed)
    diff = json.loads(run_hook([], request(root, "read", call="c3", path=str(path), output=now)))
    assert "changed since your result c1" in diff["output"] and "fresh=true" not in diff["output"]
    assert _expand(root, "c3", diff["output"]) == now  # the text the diff made of c1's


def _expand(root: Path, call: str, output: str) -> str:
    answer = run_hook([], request(root, "expand", call=call, tool="read", output=output))
    text: str = json.loads(answer)["output"]
    return text


def test_text_opencode_showed_differently_backs_nothing(root: Path, notes: str) -> None:
    path = root / "notes.txt"
    stale = opencode_read(path, notes.replace("line 3:", "line 3 (old):"))  # changed in between
    run_hook([], request(root, "read", call="c1", path=str(path), output=stale))
    fresh = opencode_read(path, notes)
    again = json.loads(run_hook([], request(root, "read", call="c2", path=str(path), output=fresh)))
    assert again["output"] is None  # content again, never "unchanged since c1"


def test_a_malformed_request_is_one_log_line_and_no_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    answer = json.loads(run_hook([], b'{"id": 3, "op": "read"}'))
    assert answer == {"id": 3, "output": None, "error": True}
    assert len(log_path().read_text().splitlines()) == 1
    assert run_hook([], b"") == b""


def test_the_resident_process_answers_lines_until_stdin_closes(
    root: Path, notes: str, tmp_path: Path
) -> None:
    path = root / "notes.txt"
    shown = opencode_read(path, notes)
    lines = [
        request(root, "read", call="c1", path=str(path), output=shown),
        b"not json",
        request(root, "read", call="c2", path=str(path), output=shown),
        request(
            root, "bash", call="c3", command="cat notes.txt", workdir=None, exit=0, output=notes
        ),  # fmt: skip
    ]
    cache = tmp_path / "xdg-cache"  # the bad line is logged: not in the user's own cache
    done = subprocess.run(
        [sys.executable, "-m", "filecache.adapters.hosts.opencode", "serve"],
        input=b"\n".join(lines) + b"\n", capture_output=True, timeout=120, check=True,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
    )  # fmt: skip
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == 4 and answers[0]["output"] is None and answers[1]["error"]
    assert "JSONDecodeError" in (cache / "filecache" / "hooks.log").read_text(encoding="utf-8")
    assert "unchanged since your result c1" in answers[2]["output"]
    assert answers[3]["output"].startswith("[filecache] notes.txt unchanged since your result c1")
    assert not done.stderr.strip()


def test_a_denied_file_is_never_stored(root: Path) -> None:
    env = root / ".env"
    env.write_text("TOKEN=hunter2-unit\n")
    shown = opencode_read(env, env.read_text())
    for call in ("c1", "c2"):
        answer = json.loads(run_hook([], request(root, "read", call=call, path=str(env),
                                                 output=shown)))  # fmt: skip
        assert answer["output"] is None
    run_hook([], request(root, "bash", call="c3", command="cat .env", workdir=None, exit=0,
                         output=env.read_text()))  # fmt: skip
    stored = b"".join(p.read_bytes() for p in (root / ".filecache").rglob("*") if p.is_file())
    assert b"hunter2" not in stored


def test_module_names() -> None:
    assert (opencode.HOST_NAME, opencode.DISPLAY_NAME) == ("opencode", "opencode")
    assert PLUGIN.is_file() and PLUGIN.suffix == ".js"


# -- the plugin itself, in node ----------------------------------------------------------------

PLUGIN_CHECK = """
import {{ FilecachePlugin }} from {plugin}
const alive = setInterval(() => {{}}, 1000)  // the plugin's child and pipes keep no loop alive
const hooks = await FilecachePlugin({{ directory: {root} }}, {{ python: {python} }})
const tool = (callID, output, compacted) => ({{ type: "tool", sessionID: "ses_1", callID,
  tool: "read", state: {{ status: "completed", output, time: compacted ? {{ start: 1,
  compacted: 5 }} : {{ start: 1 }} }} }})
const parts = [
  tool("c1", "<content>\\n1: the file\\n", true),  // pruned by opencode; c2 names it
  tool("c0", "1: another file\\n", true),  // pruned, named by nothing: stays pruned
  tool("c2", "<path>/p</path>\\n<type>file</type>\\n<content>\\n[filecache] a.txt unchanged " +
       "since your result c1 (3 lines, ab12cd34)\\n\\n(End of file - total 3 lines)", false),
  tool("c3", "[filecache] b.txt changed since your result c4 (xxh3 a -> b); all 2 lines:", false),
  tool("c4", "[filecache] b.txt unchanged since your results c5 and c6 (2 lines, ff)", true),
  tool("c5", "1: x", true), tool("c6", "2: y", true),
]
const messages = [{{ info: {{ sessionID: "ses_1", role: "assistant" }}, parts }}]
await hooks["experimental.chat.messages.transform"]({{}}, {{ messages }})
console.log(JSON.stringify(parts.map((p) => [p.callID, Boolean(p.state.time.compacted)])))
await hooks.dispose()
clearInterval(alive)
"""


def test_a_pruned_result_that_a_reference_names_is_sent_again(tmp_path: Path, root: Path) -> None:
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = tmp_path / "check.mjs"
    script.write_text(PLUGIN_CHECK.format(
        plugin=json.dumps(PLUGIN.as_uri()), root=json.dumps(str(root)),
        python=json.dumps(sys.executable),
    ))  # fmt: skip
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    compacted = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    assert compacted == {"c1": False, "c0": True, "c2": False, "c3": False, "c4": False,
                         "c5": False, "c6": False}  # fmt: skip


def test_a_capped_read_is_a_range() -> None:
    text = HEAD + "1: a\n2: b\n\n(Output capped at 50 KB. Showing lines 1-2. Use offset=3 to "
    text += "continue.)\n</content>"
    shown = parse_read(text)
    assert shown is not None and (shown.start, shown.end, shown.to_end) == (1, 2, False)


# A resident that dies under a call, driven in node: the child is killed (or stopped) between
# two steps of this script, each a synchronous stretch in which node runs no event, so the
# plugin learns of the death only from the call itself. Prints what each call left as the
# tool's output, and the residents before and after.
RESIDENT_CHECK = """
import {{ FilecachePlugin }} from {plugin}
import {{ readdirSync, readFileSync, writeFileSync }} from "node:fs"
const [path, shown, kase] = [{path}, {shown}, {kase}]
const alive = setInterval(() => {{}}, 1000)
const hooks = await FilecachePlugin({{ directory: {root} }}, {{ python: {python} }})
const call = async (callID, tool, args, output) => {{
  const result = {{ output, metadata: {{}} }}
  await hooks["tool.execute.after"]({{ tool, sessionID: "ses_1", callID, args }}, result)
  return result.output
}}
const read = (callID) => call(callID, "read", {{ filePath: path }}, shown)
const state = (pid) => {{  // R, S, T (stopped), Z (dead, not reaped yet), or X (gone)
  try {{
    const stat = readFileSync(`/proc/${{pid}}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]
  }} catch {{
    return "X"
  }}
}}
const residents = () => readdirSync("/proc").filter((pid) => {{
  try {{
    const stat = readFileSync(`/proc/${{pid}}/stat`, "utf8")
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
    const command = readFileSync(`/proc/${{pid}}/cmdline`, "utf8")
    return ppid === process.pid && command.includes("serve") && !"ZX".includes(state(pid))
  }} catch {{
    return false
  }}
}}).map(Number)
const block = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
const until = (pid, wanted) => {{  // waits without letting node see the child's end
  for (let round = 0; round < 2000 && state(pid) !== wanted; round++) block(5)
  return state(pid)
}}
const out = {{ first: await read("c1") }}
const [resident] = residents()
out.before = [resident]
if (kase === "dead") {{  // dead and not reaped when the call writes to it
  process.kill(resident, "SIGKILL")
  out.state = until(resident, "Z")
  out.answer = await read("c2")
  out.replaced = residents()
}} else if (kase === "read" || kase === "edit") {{  // dies after the request reached it
  process.kill(resident, "SIGSTOP")
  out.state = until(resident, "T")
  const edit = {{ filePath: path, oldString: "line 7: the", newString: "line 7: THE" }}
  if (kase === "edit") writeFileSync(path, readFileSync(path, "utf8").replace(edit.oldString,
                                                                             edit.newString))
  const pending = kase === "read" ? read("c2")
                                  : call("e1", "edit", edit, "Edit applied successfully.")
  process.kill(resident, "SIGKILL")
  out.answer = await pending
  out.replaced = residents()
  if (kase === "edit") out.next = await call("c3", "read", {{ filePath: path }}, {edited})
}} else {{  // slow: stopped past the timeout, then running again
  process.kill(resident, "SIGSTOP")
  out.state = until(resident, "T")
  out.answer = await read("c2")
  out.during = residents()
  process.kill(resident, "SIGCONT")
  out.next = await read("c3")
}}
out.after = residents()
console.log(JSON.stringify(out))
await hooks.dispose()
clearInterval(alive)
"""


def resident_check(tmp_path: Path, root: Path, notes: str, case: str) -> dict[str, Any]:
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    path = root / "notes.txt"
    edited = notes.replace("line 7: the", "line 7: THE")
    script = tmp_path / "resident.mjs"
    script.write_text(RESIDENT_CHECK.format(
        plugin=json.dumps(PLUGIN.as_uri()), root=json.dumps(str(root)),
        python=json.dumps(sys.executable), path=json.dumps(str(path)),
        shown=json.dumps(opencode_read(path, notes)), kase=json.dumps(case),
        edited=json.dumps(opencode_read(path, edited)),
    ))  # fmt: skip
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["first"] == opencode_read(path, notes)  # content: opencode's output stands
    return out


@pytest.mark.parametrize(
    ("case", "state"),
    [("dead", "Z"), ("read", "T")],  # killed before the call / with the read pending in it
)
def test_a_resident_found_dead_is_replaced_and_the_read_sent_again(
    tmp_path: Path, root: Path, notes: str, case: str, state: str
) -> None:
    out = resident_check(tmp_path, root, notes, case)
    assert out["state"] == state
    assert "[filecache] notes.txt unchanged since your result c1" in out["answer"]
    assert len(out["replaced"]) == 1 and out["replaced"] != out["before"]  # a new one answered


def test_an_edit_the_dead_resident_may_have_applied_is_not_sent_again(
    tmp_path: Path, root: Path, notes: str
) -> None:
    out = resident_check(tmp_path, root, notes, "edit")
    assert out["answer"] == "Edit applied successfully."  # opencode's output
    assert len(out["replaced"]) == 1 and out["replaced"] != out["before"]  # within the call
    # the new resident was not given the edit (only told to forget e1): nothing of e1 is
    # recorded, and the next read of the edited file is not taken as known to the model
    host = HostSession.open("opencode", "ses_1", root)
    try:
        assert [
            e for e in host.cache.engine.store.events(host.session.id) if e.call_id == "e1"
        ] == []
    finally:
        host.close()
    assert "unchanged since" not in out["next"] and "line 7: THE quick" in out["next"]


@pytest.mark.slow  # waits for the plugin's timeout (8 s)
def test_a_slow_resident_is_not_doubled(tmp_path: Path, root: Path, notes: str) -> None:
    out = resident_check(tmp_path, root, notes, "slow")
    assert out["state"] == "T"
    assert out["answer"] == opencode_read(root / "notes.txt", notes)  # timed out: opencode's
    assert out["during"] == out["before"] == out["after"]  # no second resident, ever
    assert "[filecache] notes.txt unchanged since your result c1" in out["next"]
