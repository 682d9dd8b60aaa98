"""The host base layer: one host context as a session, the host's output as the fallback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from filecache.adapters.hosts.base import HostSession, host_session_id, log_path
from filecache.adapters.hosts.registry import run_hook
from test_secrets import store_bytes

SECRET = "API_TOKEN=hunter2-hunter2-hunter2"


@pytest.fixture
def host(root: Path) -> HostSession:
    with HostSession.open("test-host", "sess-1", root) as hs:
        yield hs


def test_a_re_read_is_a_fileref_naming_the_first_call(host: HostSession, notes: str) -> None:
    first = host.read("notes.txt", "toolu_1", host_text=notes)
    assert first is not None and first.kind == "full" and first.same_as_host
    assert first.text == notes and (first.start, first.end, first.total) == (1, 60, 60)
    again = host.read("notes.txt", "toolu_2", host_text=notes)
    assert again is not None and again.kind == "unchanged" and again.base_call_id == "toolu_1"
    assert "toolu_1" in again.text and again.tokens < first.tokens


def test_a_range_the_model_holds_is_short(host: HostSession, notes: str) -> None:
    lines = notes.splitlines(keepends=True)
    host.read("notes.txt", "toolu_1", start=1, end=60, host_text=notes)
    ranged = host.read("notes.txt", "toolu_2", start=10, end=19, host_text="".join(lines[9:19]))
    assert ranged is not None and ranged.kind == "unchanged"


def test_text_the_host_showed_differently_backs_nothing(host: HostSession, notes: str) -> None:
    clipped = notes.replace("lazy dog", "lazy d…")  # the host cut lines: the model has that
    assert host.read("notes.txt", "toolu_1", host_text=clipped) is None
    again = host.read("notes.txt", "toolu_2", host_text=notes)
    assert again is not None and again.kind == "full"


def test_a_read_after_the_hosts_own_edit_is_short(host: HostSession, root: Path) -> None:
    path = root / "notes.txt"
    host.read("notes.txt", "toolu_1", host_text=path.read_text())
    path.write_text(path.read_text().replace("line 7:", "LINE 7:"))  # the host's Edit tool
    assert host.edited("notes.txt", "toolu_2", [("line 7:", "LINE 7:")]) == "edited"
    after = host.read("notes.txt", "toolu_3", host_text=path.read_text())
    assert after is not None and after.kind == "unchanged"


def test_an_edit_that_does_not_explain_disk_makes_a_diff(host: HostSession, root: Path) -> None:
    path = root / "notes.txt"
    host.read("notes.txt", "toolu_1", host_text=path.read_text())
    text = path.read_text().replace("line 7:", "LINE 7:").replace("line 40:", "outside 40:")
    path.write_text(text)  # the host's edit, and a change by someone else
    assert host.edited("notes.txt", "toolu_2", [("line 7:", "LINE 7:")]) == "changed"
    after = host.read("notes.txt", "toolu_3", host_text=text)
    assert after is not None and after.kind == "diff"
    assert "+outside 40:" in after.text and "LINE 7" in after.text


def test_a_write_is_held_even_for_a_file_never_read(host: HostSession, root: Path) -> None:
    content = "".join(f"new {i}\n" for i in range(40))
    (root / "made.txt").write_text(content)
    assert host.wrote("made.txt", "toolu_1", content) == "written"
    again = host.read("made.txt", "toolu_2", host_text=content)
    assert again is not None and again.kind == "unchanged" and again.base_call_id == "toolu_1"


def test_a_deleted_file_is_content_again_when_it_returns(host: HostSession, root: Path) -> None:
    path = root / "notes.txt"
    host.read("notes.txt", "toolu_1", host_text=path.read_text())
    text = path.read_text()
    path.unlink()
    host.deleted("notes.txt", "toolu_2")
    path.write_text(text + "more\n")
    back = host.read("notes.txt", "toolu_3", host_text=text + "more\n")
    assert back is not None and back.kind in ("full", "diff")


def test_denied_files_and_their_hard_links_store_nothing(root: Path) -> None:
    (root / ".env").write_text(SECRET + "\n")
    os.link(root / ".env", root / "settings.txt")  # a secret under another name
    with HostSession.open("test-host", "s", root) as hs:
        assert hs.read(".env", "toolu_1", host_text=SECRET + "\n") is None
        assert hs.read("settings.txt", "toolu_2", host_text=SECRET + "\n") is None
        assert hs.shell("cat .env", "toolu_3", output=SECRET + "\n") is None
        assert hs.shell("cat settings.txt", "toolu_4", output=SECRET + "\n") is None
    assert b"hunter2" not in store_bytes(root / ".filecache" / "cache.db")


def test_outside_the_root_and_missing_files_leave_the_host_alone(
    host: HostSession, outside: Path
) -> None:
    assert host.read(str(outside / "secret.txt"), "toolu_1", host_text="x") is None
    assert host.read("nope.txt", "toolu_2") is None
    assert host.read("src", "toolu_3") is None  # a directory


def test_keep_only_and_reset_send_content_again(host: HostSession, notes: str) -> None:
    host.read("notes.txt", "toolu_1", host_text=notes)
    assert host.keep_only(["toolu_1", "other"]) == set()
    assert host.keep_only(["other"]) == {"toolu_1"}
    again = host.read("notes.txt", "toolu_2", host_text=notes)
    assert again is not None and again.kind == "full"
    host.reset()
    third = host.read("notes.txt", "toolu_3", host_text=notes)
    assert third is not None and third.kind == "full"


def test_shell_reads_are_served_and_other_commands_rehash(host: HostSession, root: Path) -> None:
    out = subprocess.run(["cat", "notes.txt"], cwd=root, capture_output=True, text=True).stdout
    assert host.shell("cat notes.txt", "call_1", output=out) is None  # the host's bytes stand
    ref = host.shell("cat notes.txt", "call_2", output=out)
    assert ref is not None and "unchanged" in ref and "call_1" in ref

    def shell(command: str) -> str:
        return subprocess.run(command, shell=True, cwd=root, capture_output=True,
                              text=True).stdout  # fmt: skip

    ranged = host.shell(
        "sed -n '5,9p' notes.txt", "call_3", output=shell("sed -n '5,9p' notes.txt")
    )
    assert ranged is not None and "call_1" in ranged
    assert host.shell("sed -n '5,9p' notes.txt", "call_3b") is None  # nothing to check it with
    subprocess.run(["sed", "-i", "s/line 30:/LINE 30:/", "notes.txt"], cwd=root, check=True)
    assert host.shell("sed -i 's/line 30:/LINE 30:/' notes.txt", "call_4") is None
    diff = host.shell("cat notes.txt", "call_5", output=shell("cat notes.txt"))
    assert diff is not None and "+LINE 30:" in diff


def test_session_ids_are_per_host_context_and_root(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for r in (one, two):
        r.mkdir()
        (r / "a.txt").write_text("".join(f"{r.name} {i}\n" for i in range(50)))
    store = str(tmp_path / "shared.db")
    with HostSession.open("h", "same", one, store=store) as a:
        a.read("a.txt", "toolu_1", host_text=(one / "a.txt").read_text())
    with HostSession.open("h", "same", two, store=store) as b:
        first = b.read("a.txt", "toolu_2", host_text=(two / "a.txt").read_text())
        assert first is not None and first.kind == "full"  # nothing of the other root
    assert host_session_id("h", "same", one) != host_session_id("h", "same", two)
    assert host_session_id("h", "a\nb", one).startswith("h:")  # no control characters
    assert "\n" not in host_session_id("h", "a\nb", one)


def test_a_failing_hook_logs_one_line_and_answers_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(
        "filecache.adapters.hosts.registry.host_module",
        lambda name: (_ for _ in ()).throw(RuntimeError("boom\nsecond line")),
    )
    assert run_hook("claude-code", [], b"{}") == b""
    logged = log_path().read_text().splitlines()
    assert len(logged) == 1 and "claude-code" in logged[0] and "boom second line" in logged[0]


def test_the_lean_hook_command_refuses_an_unknown_host() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "filecache.adapters.hosts", "nosuch"],
        input=b"{}",
        capture_output=True,
    )
    assert done.returncode == 2 and b"usage" in done.stderr and done.stdout == b""


def test_stats_credit_only_the_answers_the_host_sent(root: Path) -> None:
    """A short answer the host did not send (with the one-time note it would have been no
    shorter than the host's own output) is the host's own read in ``stats``: no FileRef, no
    saving. Before, the ledger's "unchanged" was credited: 68% saved on a session where the
    model saw full content every time."""
    from filecache.stats import collect_stats

    small = "".join(f"line {i}: the quick brown fox jumps over the dog\n" for i in range(8))
    (root / "small.txt").write_text(small)
    note = "a one-time note " * 40
    with HostSession.open("test-host", "sess-s", root) as host:
        assert host.read("small.txt", "toolu_1", host_text=small) is not None
        again = host.read("small.txt", "toolu_2", host_text=small)
        assert again is not None and again.kind == "unchanged"
        assert host.short_or_own("toolu_2", again.text, small, note) is None
        assert host.session.held_call_ids() == {"toolu_1"}
        own = (root / "notes.txt").read_text()
        sent = host.read("notes.txt", "toolu_3", host_text=own)
        assert sent is not None and sent.kind == "full"
        short = host.read("notes.txt", "toolu_4", host_text=own)  # the proof a FileRef needs
        assert short is not None and short.kind == "unchanged"
        assert host.short_or_own("toolu_4", short.text, own, note) is not None
        report = collect_stats(host.cache.engine.store, host.session.id)
    (only,) = report.sessions
    assert dict(only.reads) == {"full": 2, "withdrawn": 1, "unchanged": 1}
    assert only.saved == sent.tokens_full - short.tokens  # toolu_4 only


def test_a_resident_keeps_the_store_open_until_a_setting_or_the_store_file_changes(
    root: Path, notes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pool``: the resident servers keep each root's ``FileCache`` open between calls; a
    changed pyproject (a new deny rule) or a store file deleted under it opens a new one."""
    from filecache.adapters.hosts import base

    monkeypatch.setattr(base, "_POOL", base._Pool())
    base.pool()
    with HostSession.open("test-host", "sess-1", root) as first:
        assert first.read("notes.txt", "toolu_1", host_text=notes) is not None
    with HostSession.open("test-host", "sess-1", root) as again:
        assert again.cache is first.cache  # still open: no store to open, no checkpoint to pay
        assert again.read("notes.txt", "toolu_2", host_text=notes).kind == "unchanged"  # type: ignore[union-attr]
    (root / "pyproject.toml").write_text('[tool.filecache]\ndeny = ["notes.txt"]\n')
    with HostSession.open("test-host", "sess-1", root) as denied:
        assert denied.cache is not first.cache
        assert denied.read("notes.txt", "toolu_3", host_text=notes) is None  # the new rule holds
    (root / "pyproject.toml").unlink()
    with HostSession.open("test-host", "sess-1", root) as before:
        assert before.cache is first.cache  # the same settings as at first: that cache again
    for f in (root / ".filecache").glob("cache.db*"):
        f.unlink()  # the user removed the store
    with HostSession.open("test-host", "sess-1", root) as fresh:
        assert fresh.cache is not first.cache
        assert fresh.read("notes.txt", "toolu_4", host_text=notes).kind == "full"  # type: ignore[union-attr]
