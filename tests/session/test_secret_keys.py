"""Private keys are denied by every name ssh-keygen and common tools write, and by content
whatever the name (issue 31, 5): through the library and the Claude Code hook command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_secrets import store_bytes

from filecache import FileCache

BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQyNTUxOQ"
OPENSSH = (
    f"-----BEGIN OPENSSH PRIVATE KEY-----\n{BODY}\nQyNTUxOQAAACBzZWNyZXQga2V5IG1hdGVyaWFs\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
PEM = f"-----BEGIN EC PRIVATE KEY-----\n{BODY}\n-----END EC PRIVATE KEY-----\n"
PKCS8 = f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{BODY}\n-----END ENCRYPTED PRIVATE KEY-----\n"
PGP = f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{BODY}\n-----END PGP PRIVATE KEY BLOCK-----\n"
PUTTY = f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n{BODY}\n"

NAMED = ["id_ed25519", "id_ecdsa", "id_dsa", "id_ecdsa_sk", "id_ed25519_sk", "id_xmss",
         "deploy_key", "github_ed25519", "ssh_host_rsa_key", "work.ppk", "cert.pfx"]  # fmt: skip
CONTENT = {"notes.txt": OPENSSH, "backup.asc": PGP, "server.crt.txt": PEM, "k8s.yaml": PKCS8,
           "putty.txt": PUTTY}  # fmt: skip


@pytest.mark.parametrize("name", NAMED)
def test_private_key_names_are_denied(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text(OPENSSH.replace("OPENSSH PRIVATE KEY", "NOT A HEADER"))
    with FileCache(tmp_path) as cache:
        assert cache.engine.secrets.denied(name)
        session = cache.session("s")
        session.read(name)
        session.read(name)
    assert BODY.encode() not in store_bytes(tmp_path / ".filecache" / "cache.db")


@pytest.mark.parametrize("name", sorted(CONTENT))
def test_private_key_content_is_denied_whatever_its_name(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("a line before the key\n" + CONTENT[name])
    (tmp_path / "plain.txt").write_text(f"{BODY} is no key without its header\n" * 3)
    with FileCache(tmp_path) as cache:
        session = cache.session("s")
        first = session.read(name)
        assert BODY in first.text  # the model is shown what it reads
        session.read(name)
        session.read("plain.txt")
    data = store_bytes(tmp_path / ".filecache" / "cache.db")
    assert b"a line before the key" not in data
    assert data.count(BODY.encode()) == data.count(f"{BODY} is no key".encode())


def test_a_key_read_through_the_claude_code_hook_is_not_stored(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text(OPENSSH)
    (project / "deploy_key").write_text("x\n" + PEM)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path / "home"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "FILECACHE_HOOK_SERVER": "0"}  # fmt: skip
    for i, name in enumerate(["notes.txt", "deploy_key"] * 2):
        text = (project / name).read_text()
        lines = text.count("\n") + 1
        payload = {
            "session_id": "s1", "transcript_path": "", "cwd": str(project),
            "hook_event_name": "PostToolUse", "tool_name": "Read", "tool_use_id": f"toolu_{i}",
            "tool_input": {"file_path": str(project / name)},
            "tool_response": {"type": "text", "file": {"filePath": str(project / name),
                              "content": text, "numLines": lines, "startLine": 1,
                              "totalLines": lines}},
        }  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-I", "-m", "filecache.adapters.hosts", "claude-code"],
            input=json.dumps(payload).encode(), env=env, cwd=project, capture_output=True,
            check=True,
        )  # fmt: skip
        assert done.stdout == b"" and done.stderr == b""
    db = project / ".filecache" / "cache.db"
    assert not db.exists() or BODY.encode() not in store_bytes(db)


@pytest.mark.parametrize(
    ("text", "held"),
    [(OPENSSH, True), (PEM, True), (PKCS8, True), (PGP, True), (PUTTY, True),
     ("-----BEGIN PUBLIC KEY-----\nxx\n", False), ("PRIVATE KEY handling notes\n", False),
     ("-----BEGIN CERTIFICATE-----\n", False), ("", False)],
)  # fmt: skip
def test_holds_private_key(text: str, held: bool) -> None:
    from filecache.secrecy import holds_private_key

    assert holds_private_key(text) is held
    assert holds_private_key(text.encode()) is held
