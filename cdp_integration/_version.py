"""The installed distribution's version, read from its metadata (one place; ``pyproject.toml`` sets it)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("cdp-integration")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
