"""The Kilo CLI host module without the binary: which config file install writes, the plugin's
host option, the resident named kilo. (Which file Kilo itself reads is checked against the real
binary in test_host_kilo.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filecache.adapters.hosts import kilo, registry
from filecache.adapters.hosts.host_specs import spec
from filecache.adapters.hosts.opencode import PLUGIN
from test_host_opencode_unit import opencode_read, request

from filecache.errors import ConfigError

OTHER = ["file:///home/u/other-plugin.js", {"x": 1}]
SCHEMA = {"$schema": "https://app.kilo.ai/config.json"}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's Kilo config folder (``$XDG_CONFIG_HOME/kilo``), not made yet."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "kilo"


def entry() -> list[object]:
    return [PLUGIN.as_uri(), {"python": sys.executable, "host": "kilo"}]


def write(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value, indent=2))


def test_a_home_where_kilo_never_ran_gets_kilo_json(folder: Path, tmp_path: Path) -> None:
    line = kilo.install(scope=None, uninstall=False, cwd=tmp_path)
    path = folder / "kilo.json"
    assert line.startswith(f"installed filecache's plugin for Kilo CLI in {path}")
    assert json.loads(path.read_text()) == {**SCHEMA, "plugin": [entry()]}
    kilo.install(scope="user", uninstall=False, cwd=tmp_path)
    assert json.loads(path.read_text()) == {**SCHEMA, "plugin": [entry()]}  # idempotent
    assert kilo.install(scope=None, uninstall=True, cwd=tmp_path).startswith("removed")
    assert json.loads(path.read_text()) == {**SCHEMA, "plugin": []}  # the file stays
    assert "not installed" in kilo.install(scope=None, uninstall=True, cwd=tmp_path)


def test_after_kilos_first_start_its_kilo_jsonc_gets_the_entry(
    folder: Path, tmp_path: Path
) -> None:
    """Kilo writes kilo.jsonc (plain JSON) on its first start and edits that file itself."""
    write(folder / "kilo.jsonc", SCHEMA)
    kilo.install(scope=None, uninstall=False, cwd=tmp_path)
    assert json.loads((folder / "kilo.jsonc").read_text()) == {**SCHEMA, "plugin": [entry()]}
    assert not (folder / "kilo.json").exists()


@pytest.mark.parametrize(
    ("files", "target"),
    [
        # the last file (config.json, kilo.json, kilo.jsonc, opencode.json, opencode.jsonc)
        # that sets "plugin" wins: its list is the one Kilo loads
        ({"kilo.jsonc": {"plugin": [OTHER]}, "opencode.json": {"plugin": []}}, "opencode.json"),
        ({"config.json": {"plugin": [OTHER]}, "kilo.jsonc": SCHEMA}, "config.json"),
        # no file sets it: Kilo's own file, unless it has comments (kilo.json then)
        ({"kilo.jsonc": '{\n  // mine\n  "model": "a/b"\n}\n'}, "kilo.json"),
        ({"opencode.json": {"model": "a/b"}}, "opencode.json"),
    ],
)  # fmt: skip
def test_the_file_whose_plugin_list_kilo_uses_gets_the_entry(
    folder: Path, tmp_path: Path, files: dict[str, object], target: str
) -> None:
    for name, value in files.items():
        write(folder / name, value)
    kilo.install(scope=None, uninstall=False, cwd=tmp_path)
    assert entry() in json.loads((folder / target).read_text())["plugin"]
    for name, value in files.items():
        if name != target:
            assert (folder / name).read_text() == (
                value if isinstance(value, str) else json.dumps(value, indent=2)
            )


def test_a_later_plugin_list_moves_the_entry_there(folder: Path, tmp_path: Path) -> None:
    """The user gave kilo.jsonc a "plugin" list (by hand) after filecache wrote
    kilo.json: Kilo now ignores kilo.json's, so install moves the entry (one per scope)."""
    kilo.install(scope=None, uninstall=False, cwd=tmp_path)
    write(folder / "kilo.jsonc", {"plugin": [OTHER]})
    assert registry.installed(tmp_path, ["kilo"])[0].path == folder / "kilo.json"
    kilo.install(scope=None, uninstall=False, cwd=tmp_path)
    assert json.loads((folder / "kilo.jsonc").read_text())["plugin"] == [OTHER, entry()]
    assert json.loads((folder / "kilo.json").read_text())["plugin"] == []


def test_a_jsonc_file_with_comments_that_holds_the_list_is_not_rewritten(
    folder: Path, tmp_path: Path
) -> None:
    text = '{\n  // mine\n  "plugin": ["kilo-foo"],\n}\n'
    write(folder / "kilo.jsonc", text)
    with pytest.raises(ConfigError, match="add this entry") as raised:
        kilo.install(scope=None, uninstall=False, cwd=tmp_path)
    assert json.dumps(entry()) in str(raised.value)
    assert (folder / "kilo.jsonc").read_text() == text and not (folder / "kilo.json").exists()


def test_a_broken_plugin_list_is_refused_untouched(folder: Path, tmp_path: Path) -> None:
    write(folder / "kilo.json", {"plugin": "x"})
    with pytest.raises(ConfigError, match='"plugin" list'):
        kilo.install(scope=None, uninstall=False, cwd=tmp_path)
    assert json.loads((folder / "kilo.json").read_text()) == {"plugin": "x"}


def test_one_installation_across_scopes_and_every_file_of_a_scope(
    folder: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    write(project / ".kilocode" / "kilo.json", {"plugin": [entry(), OTHER]})  # by hand, older
    registry.install("kilo", scope=None, cwd=project)
    line = registry.install("kilo", scope="project", cwd=project)
    assert f"removed filecache's hooks for Kilo CLI at --user ({folder / 'kilo.json'})" in line
    assert json.loads((project / ".kilo" / "kilo.json").read_text())["plugin"] == [entry()]
    assert json.loads((project / ".kilocode" / "kilo.json").read_text())["plugin"] == [OTHER]
    assert json.loads((folder / "kilo.json").read_text())["plugin"] == []
    (found,) = registry.installed(project, ["kilo"])
    assert (found.scope, found.path, found.interpreter, found.runs) == (
        "project",
        project / ".kilo" / "kilo.json",
        sys.executable,
        True,
    )
    assert registry.uninstall(project, ["kilo"]) == [
        f"removed filecache's plugin for Kilo CLI from {project / '.kilo' / 'kilo.json'}"
    ]
    assert registry.installed(project, ["kilo"]) == []


def test_the_cli_installs_and_doctor_lists_it(folder: Path, tmp_path: Path) -> None:
    run = [sys.executable, "-m", "filecache"]
    done = subprocess.run([*run, "install", "kilo"], cwd=tmp_path, capture_output=True,
                          text=True, check=True, timeout=120)  # fmt: skip
    assert done.stdout.count("\n") == 1 and str(folder / "kilo.json") in done.stdout
    doctor = subprocess.run([*run, "doctor"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert f"hooks: kilo --user in {folder / 'kilo.json'}: 1 entry, python {sys.executable}" in (
        doctor.stdout
    ), doctor.stdout


def test_kilo_runs_opencodes_plugin_so_its_spec_is_opencodes() -> None:
    mine, theirs = spec("kilo"), spec("opencode")
    assert (mine.events, mine.hook_timeout, mine.transcript, mine.scopes, mine.notice) == (
        theirs.events, theirs.hook_timeout, theirs.transcript, theirs.scopes, theirs.notice
    )  # fmt: skip
    assert (mine.told is None) == (theirs.told is None)  # told in Kilo's name when opencode is
    assert (kilo.HOST_NAME, kilo.DISPLAY_NAME, mine.module) == ("kilo", "Kilo CLI", "kilo")


def stored_sessions(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (root / ".filecache").rglob("*") if p.is_file())


def test_the_resident_named_kilo_keeps_kilos_sessions(root: Path, notes: str) -> None:
    path = root / "notes.txt"
    shown = opencode_read(path, notes)
    lines = [request(root, "read", call=c, path=str(path), output=shown) for c in ("c1", "c2")]
    done = subprocess.run(
        [sys.executable, "-m", "filecache.adapters.hosts.kilo", "serve"],
        input=b"\n".join(lines) + b"\n", capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0]["output"] is None and "unchanged since your result c1" in answers[1]["output"]
    stored = stored_sessions(root)
    assert b"kilo:ses_1@" in stored and b"opencode:ses_1" not in stored
    one = json.loads(kilo.run_hook([], request(root, "read", call="c3", path=str(path),
                                                output=shown)))  # fmt: skip
    assert "unchanged since your result c1" in one["output"]  # the same session, one shot


PLUGIN_HOST = """
import {{ FilecachePlugin }} from {plugin}
const alive = setInterval(() => {{}}, 1000)
const hooks = await FilecachePlugin({{ directory: {root} }}, {{ python: {python}, host: {host} }})
const read = async (callID) => {{
  const result = {{ output: {shown}, metadata: {{}} }}
  await hooks["tool.execute.after"]({{ tool: "read", sessionID: "ses_9", callID,
                                       args: {{ filePath: {path} }} }}, result)
  return result.output
}}
await read("c1")
console.log(JSON.stringify(await read("c2")))
await hooks.dispose()
clearInterval(alive)
"""


@pytest.mark.parametrize(
    ("host", "stored"),
    [("kilo", b"kilo:ses_9@"), ("opencode", b"opencode:ses_9@"),
     ("../../evil", b"opencode:ses_9@"), (None, b"opencode:ses_9@")],
)  # fmt: skip
def test_the_plugins_host_option_names_the_resident(
    tmp_path: Path, root: Path, notes: str, host: str | None, stored: bytes
) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    path = root / "notes.txt"
    script = tmp_path / "check.mjs"
    script.write_text(PLUGIN_HOST.format(
        plugin=json.dumps(PLUGIN.as_uri()), root=json.dumps(str(root)),
        python=json.dumps(sys.executable), host=json.dumps(host), path=json.dumps(str(path)),
        shown=json.dumps(opencode_read(path, notes)),
    ))  # fmt: skip
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "unchanged since your result c1" in json.loads(done.stdout.strip().splitlines()[-1])
    assert stored in stored_sessions(root)


SCRIPTED_CALLS = """
import {{ FilecachePlugin }} from {plugin}
const alive = setInterval(() => {{}}, 1000)
const hooks = await FilecachePlugin({{ directory: {root} }}, {{ python: {python}, host: {host} }})
const read = async (callID) => {{
  const result = {{ output: {shown}, metadata: {{}} }}
  await hooks["tool.execute.after"]({{ tool: "read", sessionID: "ses_9", callID,
                                       args: {{ filePath: {path} }} }}, result)
  return result.output
}}
const seen = {{}}
for (const callID of ["c1", "code_1/1", "code_1/2", "c2", "code_2/1"]) {{
  seen[callID] = await read(callID)
}}
console.log(JSON.stringify(seen))
await hooks.dispose()
clearInterval(alive)
"""


@pytest.mark.parametrize("host", ["kilo", "opencode"])
@pytest.mark.parametrize(
    "env", [{}, {"KILO_EXPERIMENTAL_CODE_MODE": "1"}, {"OPENCODE_EXPERIMENTAL_CODE_MODE": "1"}]
)
def test_a_scripts_calls_keep_the_hosts_output_and_the_models_are_served(
    tmp_path: Path, root: Path, notes: str, host: str, env: dict[str, str]
) -> None:
    """In code mode (opencode 1.18.33, Kilo 7.7.7) a tool the model's script calls runs
    ``tool.execute.after`` with the id ``<the code tool's call id>/<n>``: its output stands,
    nothing relies on it, the user is told once; the model's own calls are served, with the
    mode's variable on or off."""
    import os

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    path = root / "notes.txt"
    script = tmp_path / "check.mjs"
    shown = opencode_read(path, notes)
    script.write_text(SCRIPTED_CALLS.format(
        plugin=json.dumps(PLUGIN.as_uri()), root=json.dumps(str(root)),
        python=json.dumps(sys.executable), host=json.dumps(host), path=json.dumps(str(path)),
        shown=json.dumps(shown),
    ))  # fmt: skip
    clean = {k: v for k, v in os.environ.items() if "EXPERIMENTAL" not in k}
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=120,
                          env={**clean, **env})  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["c1"] == seen["code_1/1"] == seen["code_1/2"] == seen["code_2/1"] == shown
    assert "unchanged since your result c1" in seen["c2"]  # never names a script's call
    told = [line for line in done.stderr.splitlines() if "model's scripts alone" in line]
    assert len(told) == 1 and told[0].endswith(
        f"{'Kilo' if host == 'kilo' else 'opencode'}'s own results stand for them."
    )
