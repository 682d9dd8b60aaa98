"""The gateway's HTTP side: the server in front of the model API (``proxy``, ``server``), the
user's background gateway (``user_gateway``) and ``filecache run`` (``hosts``, ``run``).

The request transform itself is ``filecache.gateway`` (pure); this package speaks HTTP and the
hosts' settings. ``proxy``, ``server`` and ``user_gateway`` need aiohttp (the ``gateway``
extra); ``routes``, ``hosts`` and ``run`` do not, so ``filecache run`` can always fall back to
the plain host.
"""
