"""``python -m filecache.adapters.hosts HOST [ARG...]``: the hook command, without the CLI.

The same as ``filecache hook HOST ...`` at less start-up cost (no click): reads the hook's
payload on stdin, writes the answer on stdout, always exits 0.
"""

import sys

from filecache.adapters.hosts.registry import HOSTS, run_hook


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in HOSTS:
        print(f"usage: python -m filecache.adapters.hosts {{{','.join(HOSTS)}}} [ARG...]",
              file=sys.stderr)  # fmt: skip
        return 2
    out = run_hook(argv[0], argv[1:], sys.stdin.buffer.read())
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
