"""Offline scoring of captured episodes with the official evaluators (issue 3)."""
