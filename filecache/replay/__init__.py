"""Replay: recorded traces through the cache and the policies; comparisons, metrics, reports."""
