"""Pruning: transcripts and their file tools, the prune planner and policies, message blocks and SDK
message conversion.
"""
