"""A trace's screencast frames (JPEG, ``screenshots=True``) as the PNG screenshots of imported steps.

A step's tab shows the page's last frame painted at or before the state the step holds (its DOM
snapshot's time). Frames are bounded like every blob: the JPEG's bytes (`MAX_FRAME_BYTES`) and its
pixels (`MAX_FRAME_PIXELS`, checked from the header before decoding); a frame over a bound, or one
that is not a JPEG, is left out (named in the session's ``lacks``), never decoded unbounded.
Decoding uses Pillow (installed with the official evaluator); without it frames are left out.
"""

from __future__ import annotations

import base64
import bisect
import io
from dataclasses import dataclass, field

from cdp_integration.imports._zip import ZipReader

__all__ = ["MAX_FRAME_BYTES", "MAX_FRAME_PIXELS", "Screencast"]

MAX_FRAME_BYTES = 4 * 1024**2
"""A screencast frame's JPEG larger than this is left out."""
MAX_FRAME_PIXELS = 4096 * 4096
"""A frame whose header claims more pixels than this is left out before decoding."""
_FRAME_FOLDERS = ("resources/", "screencast/")
"""Where traces keep frames: ``resources/<sha1>`` up to format 9, ``screencast/`` in format 10."""


@dataclass
class Screencast:
    """One page's frames in time order: (monotonic ms, member name inside the zip)."""

    times: list[float] = field(default_factory=list)
    members: list[str] = field(default_factory=list)

    def add(self, time: float, member: str) -> None:
        at = bisect.bisect_right(self.times, time)
        self.times.insert(at, time)
        self.members.insert(at, member)

    def at(self, time: float) -> str | None:
        """The member of the last frame at or before ``time``."""
        position = bisect.bisect_right(self.times, time)
        return self.members[position - 1] if position else None


def frame_png(reader: ZipReader, member: str, lacks: set[str]) -> str | None:
    """The frame ``member`` as base64 PNG, or None (left out, the reason added to ``lacks``)."""
    if not member.startswith(_FRAME_FOLDERS) or not reader.has(member):
        lacks.add("screencast frames whose image is not in the trace")
        return None
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with the official evaluator
        lacks.add("screencast frames (Pillow is not installed)")
        return None
    data = reader.read(member, MAX_FRAME_BYTES)
    try:
        with Image.open(io.BytesIO(data), formats=["JPEG", "PNG"]) as image:
            width, height = image.size
            if width * height > MAX_FRAME_PIXELS:
                lacks.add(f"screencast frames over {MAX_FRAME_PIXELS} pixels (left out)")
                return None
            out = io.BytesIO()
            image.convert("RGB").save(out, "PNG")
    except (OSError, ValueError, Image.DecompressionBombError):
        lacks.add("screencast frames that are not valid JPEG images (left out)")
        return None
    return base64.b64encode(out.getvalue()).decode("ascii")
