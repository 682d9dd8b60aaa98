"""The real opencode binary, headless, in a throwaway HOME, against ``scripted_chat``.

``FILECACHE_TEST_OPENCODE`` names the binary (``.ci/run`` installs the pinned ``opencode-ai`` from
npm and exports it); ``FILECACHE_TEST_OPENCODE_DEPS`` a folder where ``@opencode-ai/plugin`` was
installed with npm. With any plugin configured, opencode first installs that package into each
config folder it reads (``~/.config/opencode``, a project's ``.opencode``) unless the folder
already has ``node_modules`` and a ``package-lock.json`` listing it; the seed is copied there (hard
links), so no test reaches the network.

``OpencodeHome(tmp)`` makes the HOME (every XDG folder inside it) and a project; ``run(steps)``
runs ``opencode run`` once with a scripted model and returns the server with its recorded
requests. The provider is an ``@ai-sdk/openai-compatible`` entry (bundled in the binary: nothing
is fetched) in the user's opencode.json. ``Flavour`` holds what differs in an opencode fork that
runs the same plugin (Kilo CLI: tests/kilo_run.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from scripted_chat import ScriptedChat, Step

VERSION = "1.18.33"
DEFAULT = Path.home() / ".cache" / "filecache-ci" / f"opencode-{VERSION}"
BINARY = os.environ.get("FILECACHE_TEST_OPENCODE") or str(DEFAULT / "node_modules/.bin/opencode")
DEPS = os.environ.get("FILECACHE_TEST_OPENCODE_DEPS") or str(DEFAULT / "plugin-deps")
MODEL = "scripted/m1"


@dataclass(frozen=True)
class Flavour:
    """One host of the opencode family: its binary, its plugin package and config names."""

    host: str  # filecache's name for it (``filecache install HOST``), and its config folder
    version: str
    binary: str
    deps: str  # a folder where ``package`` was installed with npm
    package: str  # the plugin package the host installs into its config folders
    env: str  # the prefix of its environment switches
    config_file: str  # the user's config file the tests write
    variable: str  # FILECACHE_TEST_<variable> names the binary, _DEPS the package's folder
    switches: tuple[tuple[str, str], ...] = ()  # more environment, to keep it off the network


OPENCODE = Flavour("opencode", VERSION, BINARY, DEPS, "@opencode-ai/plugin", "OPENCODE",
                   "opencode.json", "OPENCODE")  # fmt: skip


def need_opencode(flavour: Flavour = OPENCODE) -> str:
    """The binary's path; skips without it (fails under CI, which installs it)."""
    binary, deps, name = flavour.binary, flavour.deps, flavour.host
    ok = os.access(binary, os.X_OK) and (Path(deps) / "node_modules" / flavour.package).is_dir()
    if not ok:
        message = (
            f"{name} {flavour.version} is not installed at {binary} (with {flavour.package} in "
            f"{deps}); run: bash .ci/run install, or set FILECACHE_TEST_{flavour.variable} and "
            f"FILECACHE_TEST_{flavour.variable}_DEPS"
        )
        if os.environ.get("CI"):
            pytest.fail(f"under CI {name} must be installed: {message}", pytrace=False)
        pytest.skip(message)
    return binary


class OpencodeHome:
    """A HOME with opencode's folders, and a project in it (``project``)."""

    flavour = OPENCODE

    def __init__(self, base: Path) -> None:
        self.home = base / "home"
        self.project = base / "project"
        self.project.mkdir(parents=True)
        self.config = self.home / ".config" / self.flavour.host
        prefix = self.flavour.env
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            f"{prefix}_DISABLE_MODELS_FETCH": "1",
            f"{prefix}_DISABLE_AUTOUPDATE": "1",
            f"{prefix}_DISABLE_LSP_DOWNLOAD": "1",
            f"{prefix}_DISABLE_SHARE": "1",
            "LANG": "C.UTF-8",
            **dict(self.flavour.switches),
        }
        self.seed(self.config)

    def seed(self, folder: Path) -> None:
        """Put the pre-installed plugin package (``@opencode-ai/plugin``) into a config folder
        of the host's."""
        deps = Path(self.flavour.deps)
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(deps / name, folder / name)
        if not (folder / "node_modules").exists():
            shutil.copytree(deps / "node_modules", folder / "node_modules",
                            symlinks=True, copy_function=os.link)  # fmt: skip

    def configure(self, base_url: str) -> None:
        """The scripted provider and model in the user's opencode.json (kept: every other key,
        such as the plugin entry ``filecache install opencode`` wrote)."""
        path = self.config / self.flavour.config_file
        config = json.loads(path.read_text()) if path.exists() else {}
        config["provider"] = {
            "scripted": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted",
                "options": {"baseURL": base_url, "apiKey": "test"},
                "models": {
                    "m1": {
                        "name": "m1",
                        "tool_call": True,
                        "limit": {"context": 200000, "output": 4000},
                    },  # fmt: skip
                },
            }
        }
        config.update(model=MODEL, small_model=MODEL, autoupdate=False, share="disabled")
        # opencode asks before reading .env files (and `run` rejects): the user allowed it here,
        # the case where filecache must keep the secret out of its store
        config["permission"] = {"read": "allow"}
        path.write_text(json.dumps(config, indent=2))

    def install(self, *args: str, python: str | None = None) -> str:
        """``filecache install opencode ARGS`` as the user of this HOME, in the project."""
        import sys

        done = subprocess.run(
            [python or sys.executable, "-m", "filecache", "install", self.flavour.host, *args],
            cwd=self.project, env={**os.environ, **self.env}, capture_output=True, text=True,
            check=True, timeout=120,
        )  # fmt: skip
        return done.stdout.strip()

    def run(
        self, steps: Sequence[Step], prompt: str = "work on the files", *extra: str
    ) -> ScriptedChat:
        """``opencode run PROMPT`` once against a server scripted with ``steps``."""
        chat = ScriptedChat(steps)
        with chat:
            self.configure(chat.base_url)
            done = subprocess.run(
                [need_opencode(self.flavour), "run", *extra, prompt], cwd=self.project,
                env=self.env,
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        self.last_stderr = done.stderr
        if done.returncode != 0 or not chat.finished():
            raise AssertionError(
                f"{self.flavour.host} run exited {done.returncode} after {len(chat.requests)} "
                "requests "
                f"(script finished: {chat.finished()}):\n{done.stdout[-2000:]}\n"
                f"{done.stderr[-4000:]}"
            )
        return chat

    def store_bytes(self) -> bytes:
        """Every byte of the project's filecache store (the database and its WAL)."""
        folder = self.project / ".filecache"
        return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())
