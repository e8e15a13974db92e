"""The README's set-up on a machine where nothing is installed, as a new user meets it.

CI runs on a machine that keeps whatever earlier runs installed, so a missing install step never shows
there. This test hides it all instead: in a mount namespace of its own (``unshare -m``, root only), every
system program the set-up may install (Chromium, tmux, kiwix-tools, zim-tools, PHP, DokuWiki, Node, npm)
is covered by an empty file or folder, and ``apt-get`` is a stand-in first on ``PATH`` that records what
it is asked and "installs" a package by uncovering what was hidden of it. In a fresh copy of this
checkout (no ``.venv``, no ``.cache``), each job of ``scripts/setup.sh`` must ask Debian for exactly what
it needs, lay out what third-party code expects (Playwright's browser folders, NLTK's punkt_tab), and
``make demo``'s main job must then run; with no Python 3.12 anywhere, set-up must say so in one line.

The uv package cache and the registries stay as they are (the packages are the same on a fresh machine,
only slower to fetch).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PACKAGES: dict[str, tuple[str, ...]] = {
    "chromium": ("/usr/lib/chromium", "/usr/bin/chromium"),
    "chromium-headless-shell": ("/usr/bin/chromium-headless-shell",),  # its binary is in /usr/lib/chromium
    "tmux": ("/usr/bin/tmux",),
    "kiwix-tools": ("/usr/bin/kiwix-serve",),
    "zim-tools": ("/usr/bin/zimwriterfs",),
    "php-cli": ("/usr/bin/php",),
    "php-cgi": ("/usr/bin/php-cgi",),
    "php-xml": (),
    "dokuwiki": ("/usr/share/dokuwiki",),
    "nodejs": ("/usr/bin/node",),
    "npm": ("/usr/bin/npm",),
}
"""Each Debian package set-up may ask for, and what it puts where set-up looks for it."""

PROGRAMS = {
    "chromium": ("chromium",),
    "tmux": ("tmux",),
    "kiwix-tools": ("kiwix-serve",),
    "zim-tools": ("zimwriterfs",),
    "php-cli": ("php",),
    "php-cgi": ("php-cgi",),
    "nodejs": ("node",),
    "npm": ("npm",),
}

ASKS = {
    "core": {"chromium", "chromium-headless-shell"},
    "docs": set(),
    "bench": {"chromium", "chromium-headless-shell", "nodejs", "npm"},
    "conformance": {
        "chromium",
        "chromium-headless-shell",
        "php-cli",
        "php-cgi",
        "php-xml",
        "dokuwiki",
        "nodejs",
        "npm",
    },
    "test": set(PACKAGES),
}
"""What each job must ask Debian for on a machine that has none of it (``make demo`` runs ``core``)."""

STAND_IN_APT = """#!/bin/sh
# apt-get as a fresh machine's set-up meets it: records what it is asked; "installs" a package by
# putting back what the test hid of it (this runs inside the test's mount namespace).
echo "$*" >> "$FRESH_APT_LOG"
[ "$1" = update ] && exit 0
[ "$1" = install ] || { echo "stand-in apt-get: unexpected: $*" >&2; exit 100; }
for arg in "$@"; do
  case "$arg" in -*|install) continue ;; esac
  while read -r package kind path target; do
    [ "$package" = "$arg" ] || continue
    if [ "$kind" = folder ]; then umount "$path"; else ln -s "$target" "$path"; fi
  done < "$FRESH_HIDDEN"
done
exit 0
"""

HIDE = """set -eu
while read -r folder original farm; do
  mount --bind "$folder" "$original"
  mount --bind "$farm" "$folder"
done < "$FRESH_FARMS"
while read -r package kind path target; do
  [ "$kind" = folder ] && mount -t tmpfs -o size=1m,mode=0755 none "$path"
done < "$FRESH_HIDDEN"
cd "$FRESH_CHECKOUT"
"""
"""Programs are hidden by covering their folder (``/usr/bin``) with a folder of links to everything else
in it (a covered file would still be found: bash's ``command -v`` reports files that are not executable);
folders (``/usr/lib/chromium``) by an empty tmpfs."""


def _can_hide() -> str | None:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "hiding installed programs needs a mount namespace: Linux, as root"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is missing"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"unshare -m refused here: {probe.stderr.decode(errors='replace').strip()}"
    return None


pytestmark = pytest.mark.skipif(_can_hide() is not None, reason=str(_can_hide()))


class FreshMachine:
    """A copy of this checkout and a namespace recipe that hides the installed system programs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.checkout = root / "checkout"
        self.bin = root / "bin"
        self.hidden = root / "hidden"
        self.farms = root / "farms"
        self.apt_log = root / "apt.log"
        self._copy_checkout()
        self.bin.mkdir()
        apt = self.bin / "apt-get"
        apt.write_text(STAND_IN_APT)
        apt.chmod(0o755)
        self.hiding: list[tuple[str, str]] = [
            (package, path) for package, paths in PACKAGES.items() for path in paths if os.path.lexists(path)
        ]

    def _copy_checkout(self) -> None:
        """The files a clone would have (tracked and new, not ignored), none of this checkout's set-up."""
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout
        for name in filter(None, listed.decode().split("\0")):
            source = REPO / name
            if not source.exists() and not source.is_symlink():
                continue  # deleted in the working tree
            target = self.checkout / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)

    def _lay_out(self) -> dict[str, str]:
        """Link farms for the folders holding hidden programs, and the hidden list; made anew for each run
        (the stand-in apt-get writes links back into a farm)."""
        shutil.rmtree(self.root / "farm", ignore_errors=True)
        shutil.rmtree(self.root / "original", ignore_errors=True)
        folders = sorted({os.path.dirname(path) for _, path in self.hiding if not os.path.isdir(path)})
        originals = {folder: self.root / "original" / str(n) for n, folder in enumerate(folders)}
        hidden_lines, farm_lines = [], []

        def reachable(path: str) -> str:
            """Where ``path`` (a program in a covered folder, or a link's end) is reached inside the namespace."""
            real = os.path.realpath(path)
            folder = os.path.dirname(real)
            return str(originals[folder] / os.path.basename(real)) if folder in originals else real

        hidden_paths = {path for _, path in self.hiding}
        for n, folder in enumerate(folders):
            farm = self.root / "farm" / str(n)
            farm.mkdir(parents=True)
            originals[folder].mkdir(parents=True)
            for entry in os.scandir(folder):
                if entry.path not in hidden_paths:
                    (farm / entry.name).symlink_to(reachable(entry.path))
            farm_lines.append(f"{folder} {originals[folder]} {farm}\n")
        for package, path in self.hiding:
            if os.path.isdir(path) and not os.path.islink(path):
                hidden_lines.append(f"{package} folder {path} -\n")
            else:
                hidden_lines.append(f"{package} file {path} {reachable(path)}\n")
        self.hidden.write_text("".join(hidden_lines))
        self.farms.write_text("".join(farm_lines))
        return {"FRESH_HIDDEN": str(self.hidden), "FRESH_FARMS": str(self.farms)}

    def run(self, script: str, *, timeout: float) -> subprocess.CompletedProcess[str]:
        """``script`` (bash) in the copy, in a fresh mount namespace with the hidden programs covered."""
        self.apt_log.write_text("")
        env = {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "FRESH_APT_LOG": str(self.apt_log),
            **self._lay_out(),
            "FRESH_CHECKOUT": str(self.checkout),
        }
        # The package caches a user's set-up fills (the test run's HOME is a private one): reading them
        # only saves the download of the same files.
        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
        env.setdefault("UV_CACHE_DIR", str(home / ".cache" / "uv"))
        env.setdefault("npm_config_cache", str(home / ".npm"))
        for leaked in (
            "VIRTUAL_ENV",
            "PLAYWRIGHT_BROWSERS_PATH",
            "NLTK_DATA",
            "PYTHONPATH",
            "UV_PROJECT_ENVIRONMENT",
        ):
            env.pop(leaked, None)
        return subprocess.run(
            ["unshare", "-m", "--propagation", "private", "bash", "-c", HIDE + script],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def asked(self) -> set[str]:
        """The packages set-up asked Debian to install."""
        packages: set[str] = set()
        for line in self.apt_log.read_text().splitlines():
            words = line.split()
            if words and words[0] == "install":
                packages |= {w for w in words[1:] if not w.startswith("-")}
        return packages


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FreshMachine]:
    fresh = FreshMachine(tmp_path_factory.mktemp("fresh-machine"))
    assert any(package == "chromium" for package, _ in fresh.hiding), (
        "this machine has no Chromium to hide: run the set-up once"
    )
    yield fresh


def _why(run: subprocess.CompletedProcess[str]) -> str:
    return f"exit {run.returncode}\nstdout:\n{run.stdout[-3000:]}\nstderr:\n{run.stderr[-3000:]}"


def test_the_hidden_programs_are_really_gone(machine: FreshMachine) -> None:
    run = machine.run(
        "command -v chromium tmux kiwix-serve zimwriterfs php php-cgi node npm || true; "
        "find /usr/lib/chromium /usr/share/dokuwiki -mindepth 1",
        timeout=60,
    )
    assert run.returncode == 0, _why(run)
    assert run.stdout.strip() == "", run.stdout


def test_make_demo_on_a_fresh_machine(machine: FreshMachine) -> None:
    """``make demo``'s set-up asks Debian for Chromium only, then the demo job runs one task."""
    run = machine.run(
        "scripts/setup.sh core && "
        ".venv/bin/cdp-session demo --task 10000 --trajectory success -o demo_output",
        timeout=900,
    )
    assert run.returncode == 0, _why(run)
    assert machine.asked() == ASKS["core"]
    assert "10000" in run.stdout and "differ" not in run.stdout.lower(), run.stdout
    checkout = machine.checkout
    browsers = list((checkout / ".cache" / "playwright-browsers").glob("chromium-*/chrome-linux64/chrome"))
    assert browsers and all(os.readlink(b) == "/usr/lib/chromium/chromium" for b in browsers)
    punkt = checkout / ".cache" / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
    assert (punkt / "abbrev_types.txt").stat().st_size > 0 and (
        punkt / "ortho_context.tab"
    ).stat().st_size > 0
    assert list((checkout / "demo_output").rglob("*.session.jsonl.gz"))


def test_make_docs_asks_debian_for_nothing(machine: FreshMachine) -> None:
    run = machine.run("scripts/setup.sh docs && .venv/bin/mkdocs --version", timeout=600)
    assert run.returncode == 0, _why(run)
    assert machine.asked() == ASKS["docs"]


@pytest.mark.parametrize("job", ["test", "conformance", "bench"])
def test_each_job_asks_debian_for_what_it_needs(machine: FreshMachine, job: str) -> None:
    """The Debian step every job starts with (``setup.sh system JOB``), then the programs are there."""
    run = machine.run(
        f"scripts/setup.sh system {job} && command -v chromium tmux kiwix-serve zimwriterfs php php-cgi node npm",
        timeout=300,
    )
    assert machine.asked() == ASKS[job], _why(run)
    found = {Path(line).name for line in run.stdout.split()}
    expected = {program for package in ASKS[job] for program in PROGRAMS.get(package, ())}
    assert expected <= found, _why(run)


@pytest.mark.skipif(
    not os.environ.get("CDP_TEST_FRESH_FULL"),
    reason="the test job's whole set-up (two venvs, five applications, ~1.5 min) runs in make test-fresh-machine",
)
def test_make_tests_whole_setup_on_a_fresh_machine(machine: FreshMachine) -> None:
    run = machine.run("scripts/setup.sh test", timeout=1800)
    assert run.returncode == 0, _why(run)
    assert machine.asked() == ASKS["test"]


def test_no_python_312_is_one_clear_line(machine: FreshMachine) -> None:
    pyenv = shutil.which("pyenv")
    roots = (
        [Path(subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip())]
        if pyenv
        else []
    )
    pythons = [str(p) for root in roots for p in (root / "versions").glob("3.12*")]
    pythons += [p for p in ("/usr/bin/python3.12", "/usr/local/bin/python3.12") if os.path.exists(p)]
    saved = list(machine.hiding)
    machine.hiding += [("python", p) for p in pythons]
    try:
        run = machine.run("scripts/setup.sh docs", timeout=300)
    finally:
        machine.hiding = saved
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2, _why(run)
    assert lines and lines[-1].startswith("setup: error: no Python 3.12 found"), _why(run)
