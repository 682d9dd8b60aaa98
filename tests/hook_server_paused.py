"""The real hook server, stopped dead after it committed one call and before it answers it.

``python -I tests/hook_server_paused.py --socket PATH --identity ID --pause-on CALL_ID`` runs
``hook_server.main`` unchanged except that ``run_hook``, once it has returned for the call
``CALL_ID`` (its turn committed, its store closed), prints ``committed CALL_ID`` on stdout and
blocks reading stdin: the test then kills the process with SIGKILL, so the answer never leaves.
``ready`` is printed on stdout once the socket listens; closing its stdin lets the paused call
go on (its answer is sent), and ``abandoned CALL_ID`` is printed once the server forgot a call
whose answer the client did not take.
"""

from __future__ import annotations

import json
import os
import sys

from filecache.adapters.hosts import hook_server


def main(argv: list[str]) -> int:
    if "--max-calls" in argv:  # a server whose call threads are all busy sooner
        at = argv.index("--max-calls")
        hook_server.MAX_CALLS = int(argv[at + 1])
        del argv[at : at + 2]
    at = argv.index("--pause-on")
    pause_on = argv[at + 1]
    del argv[at : at + 2]
    real = hook_server.run_hook

    def paused(host: str, args: list[str], payload: bytes) -> bytes:
        out = real(host, args, payload)
        if json.loads(payload).get("tool_use_id") == pause_on:
            print(f"committed {pause_on}", flush=True)
            sys.stdin.read()  # until killed
        return out

    forget = hook_server.abandon

    def abandoned(host: str, args: list[str], payload: bytes) -> None:
        forget(host, args, payload)
        print(f"abandoned {json.loads(payload).get('tool_use_id')}", flush=True)

    hook_server.run_hook = paused  # type: ignore[assignment]
    hook_server.abandon = abandoned  # type: ignore[assignment]
    ready = os.dup(1)  # "ready" goes to our stdout (the server closes its descriptor after)
    return hook_server.main([*argv, "--ready-fd", str(ready)])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
