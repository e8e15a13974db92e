"""Zip archives are read by ``cdp_integration.session.untrusted`` (the one reader of outside files)."""

from __future__ import annotations

from cdp_integration.session.untrusted import ZipLimits, ZipReader

__all__ = ["ZipLimits", "ZipReader"]
