"""The resident hook servers a test's hosts start: in a socket folder of the test's own, stopped
when the test ends.

``private_runtime(env)`` sets ``XDG_RUNTIME_DIR`` in ``env`` to a fresh short folder (the
socket path must fit in ``AF_UNIX``'s 108 bytes; a test's ``tmp_path`` is longer), and on exit
asks every server there to stop (the http hook servers recorded there too) and removes the
folder (a server whose socket is gone exits too). ``servers(env)`` is what ``filecache hook
--status`` lists, as dicts.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filecache.adapters.hosts import hook_http
from filecache.adapters.hosts.hook_client import ping, server_sockets, stop_servers


@contextmanager
def private_runtime(env: MutableMapping[str, str]) -> Iterator[Path]:
    run = Path(tempfile.mkdtemp(prefix="fc-run-", dir="/tmp"))
    env["XDG_RUNTIME_DIR"] = str(run)
    try:
        yield run
    finally:
        stop_servers(env)
        hook_http.stop_servers(env)  # the http hook servers a SessionStart hook started
        shutil.rmtree(run, ignore_errors=True)


def servers(env: MutableMapping[str, str]) -> list[dict[str, Any]]:
    found = []
    for path in server_sockets(env):
        answer = ping(path)
        if answer is not None:
            found.append(json.loads(answer[1]))
    return found
