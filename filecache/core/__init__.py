"""The pure core: hashing, text and line handling, diffs, views, the read planner, rendering,
results, edits, token counts and JSON input limits. No file system, no store.
"""
