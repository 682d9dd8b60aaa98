"""``python -m filecache``."""

from filecache.entry import main

main()
