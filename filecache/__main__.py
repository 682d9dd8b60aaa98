"""``python -m filecache``."""

from filecache.cli import main

main(prog_name="filecache")
