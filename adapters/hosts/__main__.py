"""``python -m filecache.adapters.hosts HOST [ARG...]``: the hook command, without the CLI.

The command ``filecache install HOST`` writes (with ``-I``): reads the hook's payload on stdin,
writes the answer on stdout, always exits 0. It is the thin client (``hook_client``): the call
goes to the resident hook server, or runs in this process when there is none to be had.
"""

import sys

from filecache.adapters.hosts.hook_client import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
