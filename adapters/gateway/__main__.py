"""``python -m filecache.adapters.gateway STATE``: the user's background gateway
(``user_gateway.daemon_main``; ``filecache run`` starts it)."""

import sys

from filecache.adapters.gateway.user_gateway import daemon_main

sys.exit(daemon_main(sys.argv[1:]))
