"""The agents people run (hosts): filecache inside their own tools, through their hooks.

``registry`` names the hosts and runs their hooks; ``base`` is what they share; one module per
host speaks its protocol. Nothing is imported here, so a hook loads only its own host's module.
"""

__all__: list[str] = []
