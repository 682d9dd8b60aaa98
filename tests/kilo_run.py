"""The real Kilo CLI binary, headless, in a throwaway HOME, against ``scripted_chat``.

Kilo CLI (``@kilocode/cli``) is an opencode fork: ``KiloHome`` is ``OpencodeHome`` with Kilo's
names (``opencode_run.Flavour``). ``FILECACHE_TEST_KILO`` names the binary (``.ci/run`` installs
the pinned ``@kilocode/cli`` from npm and exports it); ``FILECACHE_TEST_KILO_DEPS`` a folder where
``@kilocode/plugin`` was installed with npm, copied into each config folder the tests use
(``~/.config/kilo``, a project's ``.kilo``) as opencode's tests do. Kilo 7.7.7 installs
``@kilocode/plugin@<its own version>`` (which npm does not have: 7.3.1 is the newest) only into a
config folder with plugin files in its ``plugins/`` folder, unless ``node_modules`` and a
``package-lock.json`` listing that name are there (the version is not compared); for an entry in
kilo.json's "plugin" list it installs nothing (seen: with the network open and no seed, no
``package.json`` appears). The seed keeps a version that does install off the network.

Kilo also calls home unless told not to: telemetry (``us.i.posthog.com``) is off with
``KILO_TELEMETRY_LEVEL=off``, and its own API (``api.kilo.ai``) is sent to a closed port on
127.0.0.1 (``KILO_API_URL``). Seen with ``strace -f -e trace=connect``: with these set, every
connection a run makes is to 127.0.0.1.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from opencode_run import Flavour, OpencodeHome, need_opencode
from scripted_chat import ScriptedChat, Step

VERSION = "7.7.7"  # the newest whose Linux binary npm has (docs/kilo.md)
DEFAULT = Path.home() / ".cache" / "filecache-ci" / f"npm-kilo-{VERSION}"
BINARY = os.environ.get("FILECACHE_TEST_KILO") or str(DEFAULT / "node_modules/.bin/kilo")
DEPS = os.environ.get("FILECACHE_TEST_KILO_DEPS") or str(DEFAULT / "plugin-deps")

KILO = Flavour(
    host="kilo", version=VERSION, binary=BINARY, deps=DEPS, package="@kilocode/plugin",
    env="KILO", config_file="kilo.json", variable="KILO",
    switches=(
        ("KILO_TELEMETRY_LEVEL", "off"),
        ("KILO_API_URL", "http://127.0.0.1:9"),  # the discard port: refused at once
        ("KILO_DISABLE_DEFAULT_PLUGINS", "1"),  # @kilocode/kilo-indexing and the like (npm)
        ("KILO_DISABLE_SESSION_INGEST", "1"),
        ("KILO_DISABLE_PRESENCE", "1"),
        ("KILO_DISABLE_CODEBASE_INDEXING", "1"),
        ("EVENT_SERVICE_URL", "ws://127.0.0.1:9"),
    ),
)  # fmt: skip


def need_kilo() -> str:
    """The binary's path; skips without it (fails under CI, which installs it)."""
    return need_opencode(KILO)


class KiloHome(OpencodeHome):
    """A HOME with Kilo's folders (``config``: ``~/.config/kilo``), and a project in it."""

    flavour = KILO

    def run(
        self, steps: Sequence[Step], prompt: str = "work on the files", *extra: str
    ) -> ScriptedChat:
        """``kilo run --auto PROMPT``: Kilo asks before reading a ``.env`` file whatever the
        config's ``"permission"`` says, and ``run`` rejects what it asks; ``--auto`` allows
        it (the user allowed it here: the case where filecache must keep the secret out)."""
        return super().run(steps, prompt, "--auto", *extra)
