"""WebArena's wikipedia, the real way: a ZIM built by zim-tools' ``zimwriterfs`` from a few article
pages, served by kiwix-tools' ``kiwix-serve`` (both Debian packages; ``scripts/setup.sh`` installs them).

Articles live at WebArena's paths, ``/wikipedia_en_all_maxi_2022-05/A/<Title>``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path

import requests

from cdp_integration import environment

BOOK = "wikipedia_en_all_maxi_2022-05"
ARTICLES = {
    "Christopher_Nolan": (
        "Christopher Nolan",
        "<p>Christopher Nolan is a British-American filmmaker.</p><h2>Filmography</h2><ul class='filmography'>"
        + "".join(
            f"<li>{title} ({year})</li>"
            for title, year in (
                ("Following", 1998),
                ("Memento", 2000),
                ("Insomnia", 2002),
                ("Batman Begins", 2005),
                ("The Prestige", 2006),
                ("The Dark Knight", 2008),
                ("Inception", 2010),
                ("The Dark Knight Rises", 2012),
                ("Interstellar", 2014),
                ("Dunkirk", 2017),
                ("Tenet", 2020),
                ("Oppenheimer", 2023),
            )
        )
        + "</ul>",
    ),
    "Acadia_National_Park": (
        "Acadia National Park",
        "<p>Acadia National Park is an American national park on Mount Desert Island, Maine, the closest national "
        "park to Portland, the largest city in Maine.</p>",
    ),
    "Mister_Rogers_Neighborhood": (
        "Mister Rogers' Neighborhood",
        "<p>The series was filmed at the studios of WQED in Pittsburgh, Pennsylvania.</p>",
    ),
    "Mackinac_Bridge": (
        "Mackinac Bridge",
        "<p>The Mackinac Bridge is the longest suspension bridge in the Western Hemisphere.</p>",
    ),
}


def _png(size: int) -> bytes:
    raw = b"".join(b"\x00" + b"\x33\x66\x99" * size for _ in range(size))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _html(title: str, body: str) -> str:
    return f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head><body><h1 id="firstHeading">{title}</h1>{body}</body></html>'


def build_zim(cache: Path | None = None) -> Path:
    """The ZIM of `ARTICLES` (cached by content hash under the project's cache directory)."""
    digest = hashlib.sha256(repr(sorted(ARTICLES.items())).encode()).hexdigest()[:12]
    target = (cache or environment.cache_dir() / "standins") / digest / f"{BOOK}.zim"
    """kiwix-serve names the book after the file."""
    if target.exists():
        return target
    zimwriterfs = shutil.which("zimwriterfs")
    if zimwriterfs is None:
        raise RuntimeError("zimwriterfs not found: install Debian's zim-tools (scripts/setup.sh does)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="standin-zim-") as tmp:
        html_dir = Path(tmp) / "html"
        html_dir.mkdir()
        links = "".join(f'<li><a href="{name}">{title}</a></li>' for name, (title, _) in ARTICLES.items())
        (html_dir / "index.html").write_text(_html("Wikipedia", f"<ul>{links}</ul>"))
        for name, (title, body) in ARTICLES.items():
            (html_dir / name).write_text(_html(title, body))
        (html_dir / "favicon.png").write_bytes(_png(48))
        partial = target.with_name(f"{target.stem}.{os.getpid()}.partial")  # one per concurrent builder
        subprocess.run(
            [
                zimwriterfs,
                "-w",
                "index.html",
                "-I",
                "favicon.png",
                "-l",
                "eng",
                "-t",
                "Wikipedia",
                "-d",
                "WebArena stand-in articles",
                "-c",
                "Wikipedia",
                "-p",
                "cdp-integration tests",
                "-n",
                BOOK,
                "-j",
                str(html_dir),
                str(partial),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        partial.rename(target)
    return target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KiwixServe:
    """``kiwix-serve`` on a free 127.0.0.1 port over the stand-in ZIM; stopped by its PID."""

    def __init__(self) -> None:
        kiwix = shutil.which("kiwix-serve")
        if kiwix is None:
            raise RuntimeError("kiwix-serve not found: install Debian's kiwix-tools (scripts/setup.sh does)")
        zim = build_zim()
        for _ in range(5):
            port = _free_port()
            self.process = subprocess.Popen(
                [kiwix, "--address", "127.0.0.1", "--port", str(port), str(zim)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.url = f"http://127.0.0.1:{port}"
            if self._wait_ready():
                return
            self.stop()
        raise RuntimeError("kiwix-serve did not start")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if requests.get(f"{self.url}/{BOOK}/A/Christopher_Nolan", timeout=1).status_code == 200:
                    return True
            except requests.RequestException:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
