"""``python -m filecache``."""

from .cli import main

main(prog_name="filecache")
