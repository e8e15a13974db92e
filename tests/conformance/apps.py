"""Five real web applications, installed from packages, started on free ports in a temp dir.

- **DokuWiki** (Debian package ``dokuwiki``): a private copy of ``/usr/share/dokuwiki`` with its own
  ``inc/preload.php`` pointing at a private config and data directory, served by PHP's built-in
  server. The package's own state (``/etc/dokuwiki``, ``/var/lib/dokuwiki``) is only read.
- **Trac** (PyPI ``trac``, installed by ``scripts/setup.sh`` into ``.cache/apps/trac-venv`` with a
  pristine environment made once in ``.cache/apps/trac-env``): a copy of that environment served by
  ``tracd`` with HTTP basic authentication.
- **TiddlyWiki** (npm ``tiddlywiki``, installed by ``scripts/setup.sh`` into ``.cache/apps/tiddlywiki``):
  a single-page application whose whole UI is rendered by JavaScript from the ~2.7 MB page its Node
  server sends; tiddlers are saved through its HTTP API (``PUT /recipes/default/tiddlers/<title>``)
  and addressed by hash permalinks (``/#Title``). A fresh wiki folder per run, anonymous writes.
- **Django admin** (PyPI ``django``, in ``.cache/apps/django-venv`` with the ``waitress`` WSGI server):
  the stock admin over the one-model site in ``django_site/`` (SQLite made fresh per run, a superuser
  ``alice``), a server-rendered UI with a login form, forms and the admin's JavaScript widgets.

- **docsify** (npm ``docsify`` and ``docsify-cli``, installed by ``scripts/setup_conformance_spa.sh`` into
  ``.cache/apps/docsify``): a single-page handbook that fills itself after its load (each page's
  Markdown fetched over XHR and rendered, hash routes), served by docsify-cli with its livereload
  websocket; a link opens a sheet in a new window.

Every process is started by the test and stopped by its PID.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
APPS_CACHE = ROOT / ".cache" / "apps"
TRAC_VENV = APPS_CACHE / "trac-venv"
TRAC_TEMPLATE = APPS_CACHE / "trac-env"
TIDDLYWIKI_BIN = APPS_CACHE / "tiddlywiki" / "node_modules" / "tiddlywiki" / "tiddlywiki.js"
DJANGO_VENV = APPS_CACHE / "django-venv"
DOCSIFY_MODULES = APPS_CACHE / "docsify" / "node_modules"
DOCSIFY_BIN = DOCSIFY_MODULES / "docsify-cli" / "bin" / "docsify"
DJANGO_SITE = Path(__file__).resolve().with_name("django_site")
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


def tiddlywiki_missing() -> str | None:
    if not TIDDLYWIKI_BIN.exists():
        return "TiddlyWiki is not installed in .cache/apps (scripts/setup.sh installs it)"
    if shutil.which("node") is None:
        return "node (Debian nodejs) is not installed (scripts/setup.sh installs it)"
    return None


def django_missing() -> str | None:
    python = DJANGO_VENV / "bin" / "python"
    if not python.exists() or not list(DJANGO_VENV.glob("lib/python*/site-packages/waitress")):
        return "Django is not installed in .cache/apps (scripts/setup.sh installs it)"
    return None


def docsify_missing() -> str | None:
    if not DOCSIFY_BIN.exists() or not (DOCSIFY_MODULES / "docsify" / "dist" / "docsify.min.js").exists():
        return "docsify is not installed in .cache/apps (scripts/setup_conformance_spa.sh installs it)"
    if shutil.which("node") is None:
        return "node (Debian nodejs) is not installed (scripts/setup.sh installs it)"
    return None


def missing(name: str) -> str | None:
    """Why application ``name`` cannot run here, or ``None``."""
    return {
        "dokuwiki": dokuwiki_missing,
        "trac": trac_missing,
        "tiddlywiki": tiddlywiki_missing,
        "django": django_missing,
        "docsify": docsify_missing,
    }[name]()


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


TIDDLERS = {
    "$:/SiteTitle": ("", "Conformance Notebook"),
    "$:/DefaultTiddlers": ("", "[[Rivers]]"),
    "$:/config/AnimationDuration": ("", "0"),
    "Rivers": (
        "tags: Index",
        "Long rivers: [[Nile]], [[Amazon]], [[Yangtze]].\n\nSee also [[Dam inspection]].",
    ),
    "Nile": ("tags: River", "The Nile is 6650 km long. It flows north into the Mediterranean."),
    "Amazon": ("tags: River", "The Amazon is 6400 km long. It carries the most water of any river."),
    "Yangtze": ("tags: River", "The Yangtze is 6300 km long."),
    "Dam inspection": (
        "status: open",
        '<$checkbox field="status" checked="done" unchecked="open"> Inspection done</$checkbox>\n\n'
        "The inspection of the Aswan dam is due in spring.",
    ),
}
"""Tiddlers of the fresh wiki: title -> (extra header lines, text). Animation off so the story river
settles at once (a setting any user can make)."""


def _tid_file_name(title: str) -> str:
    return "".join(c if c.isalnum() or c in " -" else "_" for c in title) + ".tid"


def start_tiddlywiki(workdir: Path, tiddlers: dict[str, tuple[str, str]] | None = None) -> App:
    """A fresh wiki folder (the server edition's plugins, ``tiddlers``: by default the ones above)
    served by TiddlyWiki's own Node server; anonymous users may read and write, as in its default
    configuration."""
    wiki = workdir / "tiddlywiki"
    (wiki / "tiddlers").mkdir(parents=True)
    (wiki / "tiddlywiki.info").write_text(
        '{"plugins": ["tiddlywiki/tiddlyweb", "tiddlywiki/filesystem"],'
        ' "themes": ["tiddlywiki/vanilla", "tiddlywiki/snowwhite"]}\n'
    )
    for title, (header, text) in (TIDDLERS if tiddlers is None else tiddlers).items():
        fields = f"title: {title}\n" + (header + "\n" if header else "")
        (wiki / "tiddlers" / _tid_file_name(title)).write_text(f"{fields}\n{text}\n")
    port = _free_port()
    process = subprocess.Popen(
        ["node", str(TIDDLYWIKI_BIN), str(wiki), "--listen", f"port={port}", "host=127.0.0.1"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url + "/status", process, timeout=60)
    except BaseException:
        stop(App("tiddlywiki", url, process, wiki))
        raise
    return App("tiddlywiki", url, process, wiki)


_DJANGO_INIT = """
import django
django.setup()
from django.core.management import call_command
from django.contrib.auth.models import User
call_command("migrate", verbosity=0)
call_command("loaddata", "books", verbosity=0)
User.objects.create_superuser({user!r}, "alice@example.org", {password!r})
"""


def start_django(workdir: Path) -> App:
    """A fresh SQLite database for ``django_site`` (migrated, the books fixture, superuser ``alice``),
    served by waitress; the admin is at ``/admin/``."""
    site = workdir / "django"
    site.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(DJANGO_SITE),
        # no bytecode beside the tracked site's sources, unless the run caches it elsewhere (make test)
        **({} if os.environ.get("PYTHONPYCACHEPREFIX") else {"PYTHONDONTWRITEBYTECODE": "1"}),
        "DJANGO_SETTINGS_MODULE": "conformance_site.settings",
        "CONFORMANCE_DJANGO_DB": str(site / "db.sqlite3"),
    }
    python = str(DJANGO_VENV / "bin" / "python")
    subprocess.run(
        [python, "-c", _DJANGO_INIT.format(user=USER, password=PASSWORD)],
        check=True,
        cwd=site,
        env=env,
        capture_output=True,
        timeout=300,
    )
    port = _free_port()
    process = subprocess.Popen(
        [
            python,
            "-m",
            "waitress",
            f"--listen=127.0.0.1:{port}",
            "--threads=4",
            "conformance_site.wsgi:application",
        ],
        cwd=site,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url + "/admin/login/", process, timeout=60)
    except BaseException:
        stop(App("django", url, process, site))
        raise
    return App("django", url, process, site)


DOCSIFY_INDEX = """<!doctype html>
<html><head><meta charset="utf-8"><title>Plant handbook</title>
<link rel="stylesheet" href="/_lib/vue.min.css"></head>
<body><div id="app">Loading the handbook</div>
<script>window.$docsify = {name: "Plant handbook", loadSidebar: true, externalLinkTarget: "_blank", routerMode: "hash"};</script>
<script src="/_lib/docsify.min.js"></script>
</body></html>
"""
DOCSIFY_PAGES = {
    "README.md": "# Plant handbook\n\nThe plant runs two reactors and three turbines. "
    "See [Reactors](reactors.md), [Turbines](turbines.md) and the [Maintenance](maintenance.md) schedule.\n",
    "_sidebar.md": "- [Home](/)\n- [Reactors](reactors.md)\n- [Turbines](turbines.md)\n"
    "- [Maintenance](maintenance.md)\n",
    "reactors.md": "# Reactors\n\n| Reactor | Output |\n| --- | --- |\n| Reactor 1 | 900 MW |\n"
    "| Reactor 2 | 1200 MW |\n\nThe [inspection sheet](/sheet.html ':target=_blank') opens in a new window.\n",
    "turbines.md": "# Turbines\n\n- Turbine A: 300 MW\n- Turbine B: 450 MW\n- Turbine C: 350 MW\n",
    "maintenance.md": "# Maintenance\n\nThe next outage of Reactor 1 is in week 14.\n",
    "sheet.html": "<!doctype html><html><head><title>Inspection sheet</title></head>"
    "<body><h1>Inspection sheet</h1><p>Reactor 2 last inspected in week 9.</p></body></html>\n",
}


def start_docsify(workdir: Path) -> App:
    """A handbook served by docsify-cli's own server (with its livereload websocket): the page is an
    empty shell whose script fetches each page's Markdown over XHR after the load and renders it,
    routed by hash (``/#/reactors``); a link opens a sheet in a new window. The library's own files
    are copied next to the pages (no CDN)."""
    docs = workdir / "docsify"
    (docs / "_lib").mkdir(parents=True)
    dist = DOCSIFY_MODULES / "docsify" / "dist"
    shutil.copy(dist / "docsify.min.js", docs / "_lib")
    shutil.copy(dist / "themes" / "addons" / "vue.min.css", docs / "_lib")
    (docs / "index.html").write_text(DOCSIFY_INDEX)
    for name, text in DOCSIFY_PAGES.items():
        (docs / name).write_text(text)
    port, reload_port = _free_port(), _free_port()
    process = subprocess.Popen(
        ["node", str(DOCSIFY_BIN), "serve", str(docs), "--port", str(port), "--host", "127.0.0.1",
         "--livereload-port", str(reload_port), "--no-open"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url + "/README.md", process, timeout=60)
    except BaseException:
        stop(App("docsify", url, process, docs))
        raise
    return App("docsify", url, process, docs)


def context_options(app: App) -> dict[str, object]:
    """Keyword arguments for ``browser.new_context`` that ``app`` needs (Trac: HTTP basic auth)."""
    if app.name == "trac":
        return {"http_credentials": {"username": USER, "password": PASSWORD}}
    return {}


def sign_in(page: Any, app: App) -> None:
    """Sign ``page``'s browser context in as ``USER`` the way a person would (TiddlyWiki: anonymous
    users may write, nothing to do). Leaves the page on the application's signed-in landing page."""
    if app.name == "dokuwiki":
        page.goto(app.url + "/doku.php/start?do=login")
        page.fill("input[name=u]", USER)
        page.fill("input[name=p]", PASSWORD)
        with page.expect_navigation():
            page.click("#dw__login button[type=submit]")
    elif app.name == "trac":  # HTTP basic auth: the context carries the credentials
        page.goto(app.url + "/login")
    elif app.name == "django":
        page.goto(app.url + "/admin/login/?next=/admin/")
        page.fill("#id_username", USER)
        page.fill("#id_password", PASSWORD)
        with page.expect_navigation():
            page.click("#login-form input[type=submit]")
        if not page.url.rstrip("/").endswith("/admin"):
            raise RuntimeError(f"django: sign-in did not reach the admin index ({page.url})")


STARTERS = {
    "dokuwiki": start_dokuwiki,
    "trac": start_trac,
    "tiddlywiki": start_tiddlywiki,
    "django": start_django,
    "docsify": start_docsify,
}


@contextlib.contextmanager
def running(start: object, workdir: Path) -> Iterator[App]:
    app = start(workdir)  # type: ignore[operator]
    try:
        yield app
    finally:
        stop(app)
