"""Two real web applications, installed from packages, started on free ports in a temp dir.

- **DokuWiki** (Debian package ``dokuwiki``): a private copy of ``/usr/share/dokuwiki`` with its own
  ``inc/preload.php`` pointing at a private config and data directory, served by PHP's built-in
  server. The package's own state (``/etc/dokuwiki``, ``/var/lib/dokuwiki``) is only read.
- **Trac** (PyPI ``trac``, installed by ``scripts/setup.sh`` into ``.cache/apps/trac-venv`` with a
  pristine environment made once in ``.cache/apps/trac-env``): a copy of that environment served by
  ``tracd`` with HTTP basic authentication.

Both processes are started by the test and stopped by their PID.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS_CACHE = ROOT / ".cache" / "apps"
TRAC_VENV = APPS_CACHE / "trac-venv"
TRAC_TEMPLATE = APPS_CACHE / "trac-env"
DOKUWIKI_SOURCE = Path("/usr/share/dokuwiki")
DOKUWIKI_PACKAGE_DATA = Path("/var/lib/dokuwiki/data")

USER = "alice"
PASSWORD = "conformance-pw-1"


@dataclass(frozen=True)
class App:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    root: Path


def dokuwiki_missing() -> str | None:
    if not (DOKUWIKI_SOURCE / "doku.php").exists():
        return "Debian package dokuwiki is not installed (scripts/setup.sh installs it)"
    if shutil.which("php") is None:
        return "php (Debian php-cli) is not installed (scripts/setup.sh installs it)"
    return None


def trac_missing() -> str | None:
    if not (TRAC_VENV / "bin" / "tracd").exists() or not (TRAC_TEMPLATE / "VERSION").exists():
        return "Trac is not installed in .cache/apps (scripts/setup.sh installs it)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_up(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                response.read(1)
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url}: the server did not answer within {timeout:.0f} s")


def stop(app: App) -> None:
    """Stop the server by its PID (SIGTERM, then SIGKILL)."""
    if app.process.poll() is None:
        os.kill(app.process.pid, signal.SIGTERM)
        try:
            app.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(app.process.pid, signal.SIGKILL)
            app.process.wait()


def _php_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


DOKUWIKI_PAGES = {
    "start": "====== Welcome ======\n\nThe conformance wiki. See [[facts:rivers|the rivers]].\n",
    "facts:rivers": (
        "====== Rivers ======\n\nLong rivers of the world.\n\n"
        "===== Nile =====\n\nThe Nile is 6650 km long.\n\n"
        "===== Amazon =====\n\nThe Amazon is 6400 km long.\n\n"
        "===== Yangtze =====\n\nThe Yangtze is 6300 km long.\n"
    ),
    "facts:secret": "====== Secret ======\n\nThe code word is heron.\n",
    "playground:playground": "====== Playground ======\n\nNothing yet.\n",
}


def start_dokuwiki(workdir: Path) -> App:
    """A private DokuWiki: code copied from the package, config and data of its own, ``php -S``."""
    site = workdir / "dokuwiki"
    code, conf, data = site / "www", site / "conf", site / "data"
    shutil.copytree(DOKUWIKI_SOURCE, code, symlinks=False, ignore=shutil.ignore_patterns(".htaccess*"))
    shutil.copytree(DOKUWIKI_PACKAGE_DATA, data, symlinks=False)
    conf.mkdir(parents=True)
    for item in Path("/etc/dokuwiki").iterdir():
        if item.is_file() and item.suffix in (".php", ".conf", ".css", ".json") and item.exists():
            with contextlib.suppress(OSError):
                shutil.copy(item, conf / item.name, follow_symlinks=True)
    (code / "inc" / "preload.php").write_text(
        f"<?php\nif(!defined('DOKU_CONF')) define('DOKU_CONF', {_php_string(str(conf) + '/')});\n"
    )
    (conf / "local.php").write_text(
        "<?php\n"
        f"$conf['savedir'] = {_php_string(str(data))};\n"
        "$conf['title'] = 'Conformance Wiki';\n"
        "$conf['lang'] = 'en';\n"
        "$conf['useacl'] = 1;\n"
        "$conf['superuser'] = '@admin';\n"
        "$conf['userewrite'] = 2;\n"
        "$conf['updatecheck'] = 0;\n"
        "$conf['dnslookups'] = 0;\n"
        "$conf['breadcrumbs'] = 0;\n"
    )
    (conf / "acl.auth.php").write_text("*               @ALL        1\n*               @user       8\n")
    hashed = subprocess.run(
        ["php", "-r", f"echo password_hash({_php_string(PASSWORD)}, PASSWORD_BCRYPT);"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (conf / "users.auth.php").write_text(f"{USER}:{hashed}:Alice Example:alice@example.org:admin,user\n")
    for page, text in DOKUWIKI_PAGES.items():
        path = data / "pages" / (page.replace(":", "/") + ".txt")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    port = _free_port()
    process = subprocess.Popen(
        ["php", "-S", f"127.0.0.1:{port}", "-t", str(code)],
        cwd=code,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url + "/doku.php", process)
    except BaseException:
        stop(App("dokuwiki", url, process, site))
        raise
    return App("dokuwiki", url, process, site)


def start_trac(workdir: Path) -> App:
    """A copy of the pristine Trac environment, served by ``tracd`` with basic auth for ``alice``."""
    import base64
    import hashlib

    env = workdir / "trac-env"
    shutil.copytree(TRAC_TEMPLATE, env)
    digest = base64.b64encode(hashlib.sha1(PASSWORD.encode()).digest()).decode()
    htpasswd = workdir / "trac.htpasswd"
    htpasswd.write_text(f"{USER}:{{SHA}}{digest}\n")
    port = _free_port()
    process = subprocess.Popen(
        [
            str(TRAC_VENV / "bin" / "tracd"),
            "--single-env",
            "--hostname=127.0.0.1",
            f"--port={port}",
            f"--basic-auth=*,{htpasswd},Conformance",
            str(env),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url + "/wiki", process, timeout=60)
    except BaseException:
        stop(App("trac", url, process, env))
        raise
    return App("trac", url, process, env)


@contextlib.contextmanager
def running(start: object, workdir: Path) -> Iterator[App]:
    app = start(workdir)  # type: ignore[operator]
    try:
        yield app
    finally:
        stop(app)
