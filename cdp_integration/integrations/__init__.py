"""Capture for agent frameworks that drive Chromium themselves (top layer; the library never imports it)."""
