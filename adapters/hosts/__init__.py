"""The agents people run (hosts): filecache inside their own tools, through their hooks."""
