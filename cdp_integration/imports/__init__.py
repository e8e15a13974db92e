"""Recordings made by other tools turned into sessions of this format: Playwright traces,
WebArena-Verified run folders, browser-use histories, AgentLab experiment folders.

Every imported session says so in its header (``options.provenance`` = ``imported:<format>``), and
scores and reports made from it carry that provenance. Inputs are untrusted: archives are read
without extracting them (zip-slip names and zip bombs refused), pickles without running code.

Names are imported on first use (PEP 562), so importing one module of the package loads no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdp_integration._lazy import lazy_exports

if TYPE_CHECKING:
    from cdp_integration.imports.common import FORMATS, ImportedEpisode, imported_provenance, write_episode
    from cdp_integration.imports.importer import import_recording, import_recordings

__all__ = [
    "FORMATS",
    "ImportedEpisode",
    "import_recording",
    "import_recordings",
    "imported_provenance",
    "write_episode",
]

if not TYPE_CHECKING:  # type checkers see the imports above, not the lazy lookup
    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            "FORMATS": "cdp_integration.imports.common",
            "ImportedEpisode": "cdp_integration.imports.common",
            "imported_provenance": "cdp_integration.imports.common",
            "write_episode": "cdp_integration.imports.common",
            "import_recording": "cdp_integration.imports.importer",
            "import_recordings": "cdp_integration.imports.importer",
        },
    )
