"""HAR 1.2: a session's traffic exported for WebArena-Verified and other tools, and HAR files read
back as typed, validated entries.

Names are imported on first use (PEP 562), so importing one module of the package loads no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdp_integration._lazy import lazy_exports

if TYPE_CHECKING:
    from cdp_integration.har.export import exchange_to_har_entry, session_har_entries, session_to_har
    from cdp_integration.har.importer import MAX_HAR_BYTES, HarEntry, load_har

__all__ = [
    "MAX_HAR_BYTES",
    "HarEntry",
    "exchange_to_har_entry",
    "load_har",
    "session_har_entries",
    "session_to_har",
]

if not TYPE_CHECKING:  # type checkers see the imports above, not the lazy lookup
    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            "exchange_to_har_entry": "cdp_integration.har.export",
            "session_har_entries": "cdp_integration.har.export",
            "session_to_har": "cdp_integration.har.export",
            "HarEntry": "cdp_integration.har.importer",
            "MAX_HAR_BYTES": "cdp_integration.har.importer",
            "load_har": "cdp_integration.har.importer",
        },
    )
