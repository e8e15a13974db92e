"""A bundled demo shop (real HTTP server) with the pages and APIs WebArena shopping tasks touch."""

from cdp_integration.demo.site import DemoSite

__all__ = ["DemoSite"]
