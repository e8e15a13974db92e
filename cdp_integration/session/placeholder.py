"""What a redaction placeholder looks like, apart from the redactor that writes them.

Replay matches recorded requests whose secrets were replaced by placeholders; it needs this pattern,
not the redaction rules.
"""

from __future__ import annotations

import re

__all__ = ["PLACEHOLDER_PATTERN"]

PLACEHOLDER_PATTERN = re.compile(r"REDACTED-[a-z]+-[0-9a-f]{8}")
"""Every placeholder: ``REDACTED-<kind>-<8 hex digits>``."""
