"""Which hooks ``filecache install claude-code`` writes without ``--http`` or ``--command``
(``hook_form``): http hooks only where no one else can log in, else command hooks; the line
printed says which and why, and either flag overrides it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from filecache.adapters.hosts import hook_form
from filecache.adapters.hosts.claude_settings import HTTP_EVENTS, installed
from filecache.adapters.hosts.hook_form import other_people

from filecache.cli import main

ME = os.getuid()
SYSTEM = [("root", 0, "/bin/bash"), ("daemon", 1, "/usr/sbin/nologin"),
          ("nobody", 65534, "/usr/sbin/nologin"), ("postgres", 112, "/bin/bash")]  # fmt: skip


@pytest.mark.parametrize(
    ("accounts", "sources", "others"),
    [
        (SYSTEM, ["files", "systemd"], []),  # services only: a laptop, a container
        ([*SYSTEM, ("me", 4321, "/bin/zsh")], ["files"], []),  # the user themself
        ([*SYSTEM, ("alice", 1000, "/bin/bash")], ["files"], ["alice"]),
        ([*SYSTEM, ("bob", 1001, "")], ["files"], ["bob"]),  # no shell: /bin/sh
        ([*SYSTEM, ("svc", 1002, "/usr/sbin/nologin"), ("x", 1003, "/bin/false")], ["files"], []),
        ([*SYSTEM, ("dyn", 61184, "/bin/sh")], ["files"], []),  # systemd's dynamic users
        (SYSTEM, ["files", "sss"], ["accounts from sss"]),  # LDAP / AD through sssd
        (SYSTEM, ["compat", "[NOTFOUND=return]", "ldap"], ["accounts from ldap"]),
    ],
)
def test_other_people(
    accounts: list[tuple[str, int, str]], sources: list[str], others: list[str]
) -> None:
    assert other_people(4321, accounts, sources) == others


def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, passwd: str, passwd_line: str) -> None:
    """This process's machine, as ``hook_form`` reads it, made of the files given."""
    (tmp_path / "passwd").write_text(passwd)
    (tmp_path / "nsswitch.conf").write_text(f"# comment\n{passwd_line}\ngroup: files\n")
    monkeypatch.setattr(hook_form, "PASSWD", tmp_path / "passwd")
    monkeypatch.setattr(hook_form, "NSSWITCH", tmp_path / "nsswitch.conf")
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)  # no proxy: test_a_proxy_means_command_hooks


ALONE = f"root:x:0:0:root:/root:/bin/bash\nme:x:{ME}:{ME}::/home/me:/bin/bash\n"
SHARED = ALONE + f"alice:x:{ME + 1 if ME >= 1000 else 1000}:100::/home/alice:/bin/bash\n"


def test_choose_reads_the_machines_accounts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine(tmp_path, monkeypatch, ALONE, "passwd: files systemd")
    assert hook_form.choose() == (True, "http hooks: only you can log in here; --command for "
                                  "command hooks")  # fmt: skip
    machine(tmp_path, monkeypatch, SHARED, "passwd: files systemd")
    http, why = hook_form.choose()
    assert not http and "others can log in here (alice)" in why and "--http" in why
    machine(tmp_path, monkeypatch, ALONE + "+::::::\n", "passwd: compat")  # NIS, old style
    assert hook_form.choose()[0] is False
    machine(tmp_path, monkeypatch, ALONE, "passwd: files sss")
    assert hook_form.choose()[0] is False
    (tmp_path / "passwd").unlink()  # unknown: the safe form
    http, why = hook_form.choose()
    assert not http and "unknown" in why


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "no-claude"))  # no claude: a note, not a failure
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return home


def per_call_types(project: Path) -> set[str]:
    """The hook types filecache installed for Claude Code's per-call events."""
    import json

    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    return {h["type"] for event in HTTP_EVENTS for group in hooks[event] for h in group["hooks"]}


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="http hooks: Linux only")
def test_install_without_a_flag_follows_the_machine_and_a_flag_overrides_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, runner = tmp_path / "project", CliRunner()
    machine(tmp_path, monkeypatch, ALONE, "passwd: files")
    done = runner.invoke(main, ["install", "claude-code"])
    assert done.exit_code == 0 and "http hooks: only you can log in here" in done.output
    assert per_call_types(project) == {"http"}
    assert runner.invoke(main, ["install", "claude-code", "--command"]).exit_code == 0
    assert per_call_types(project) == {"command"}  # replaced, never beside
    machine(tmp_path, monkeypatch, SHARED, "passwd: files")
    done = runner.invoke(main, ["install", "claude-code"])
    assert done.exit_code == 0 and "command hooks: others can log in here" in done.output
    assert per_call_types(project) == {"command"} and installed(project)[0].http_ports == ()
    done = runner.invoke(main, ["install", "claude-code", "--http"])
    assert done.exit_code == 0 and "others can log in" not in done.output, done.output
    assert per_call_types(project) == {"http"}
    for flags, says in ((["--http", "--command"], "exclude each other"),
                        (["--command", "--uninstall"], "exclude each other"),
                        (["--http-port", "47010", "--command"], "exclude each other")):  # fmt: skip
        refused = runner.invoke(main, ["install", "claude-code", *flags])
        assert refused.exit_code == 2 and says in refused.output, (flags, refused.output)
    refused = runner.invoke(main, ["install", "codex", "--command"])
    assert refused.exit_code == 2 and "Claude Code only" in refused.output
    assert per_call_types(project) == {"http"}  # a refused command changed nothing
    gone = runner.invoke(main, ["uninstall", "claude-code"])
    assert gone.exit_code == 0 and installed(project) == []


@pytest.mark.parametrize(
    ("env", "found"),
    [
        ({}, None),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "HTTPS_PROXY"),
        ({"http_proxy": "http://proxy:3128", "NO_PROXY": "localhost"}, "http_proxy"),
        ({"ALL_PROXY": "socks5://proxy", "no_proxy": "127.0.0.0/8"}, "ALL_PROXY"),  # no CIDR
        ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "example.com, 127.0.0.1"}, None),
        ({"HTTP_PROXY": "http://proxy:3128", "no_proxy": "*"}, None),
        ({"HTTPS_PROXY": ""}, None),
    ],
)
def test_a_proxy_that_claude_code_would_send_http_hooks_through(
    env: dict[str, str], found: str | None
) -> None:
    """Claude Code 2.1.332 sends an http hook to 127.0.0.1 as a CONNECT to the proxy of
    HTTPS_PROXY / HTTP_PROXY unless NO_PROXY names 127.0.0.1 or is *: probed with the real
    binary (a CIDR range or localhost in NO_PROXY did not keep the hook off the proxy)."""
    assert hook_form.proxy_in_the_way(env) == found


def test_a_proxy_means_command_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine(tmp_path, monkeypatch, ALONE, "passwd: files")
    if not Path("/proc/net/tcp").exists():
        pytest.skip("http hooks: Linux only")
    http, why = hook_form.choose({"HTTPS_PROXY": "http://proxy:3128"})
    assert not http and "HTTPS_PROXY is set" in why and "NO_PROXY" in why
    assert hook_form.choose({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "127.0.0.1"})[0]
