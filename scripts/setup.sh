#!/usr/bin/env bash
# Set up what one job needs, on a fresh machine; idempotent (a second run only checks).
#
#   scripts/setup.sh core         make demo: Debian Chromium, uv, a Python 3.12 .venv with the package's own
#                                 locked dependencies, the data third-party code expects (Playwright
#                                 browser layout, NLTK punkt_tab). No test tools, no conformance apps.
#   scripts/setup.sh docs         make docs: the .venv with the docs group (MkDocs, Material, mkdocstrings).
#   scripts/setup.sh bench        make bench: core, plus Node and TiddlyWiki (the real single-page app the
#                                 capture benchmarks load).
#   scripts/setup.sh conformance  the real applications of tests/conformance (DokuWiki + PHP, Trac,
#                                 TiddlyWiki + Node, Django) in .cache/apps.
#   scripts/setup.sh test         make test: all of the above, plus tmux and kiwix-tools/zim-tools (the
#                                 WebArena stand-ins), the openhands extra, the dev group and .venv-v1.
#   scripts/setup.sh [all]        the same as test.
#   scripts/setup.sh system JOB   only the Debian packages JOB needs and this machine lacks (each job above
#                                 starts with this; tests/integration/test_fresh_machine.py checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
USAGE="usage: $0 [core|docs|bench|conformance|test|all] | $0 system JOB"
SYSTEM_ONLY=""
if [ "${1:-}" = system ]; then SYSTEM_ONLY=1; shift; [ $# -eq 1 ] || { echo "$USAGE" >&2; exit 2; }; fi
JOB="${1:-all}"
case "$JOB" in core|docs|bench|conformance|test|all) ;; *) echo "$USAGE" >&2; exit 2 ;; esac

apt_install() {  # apt_install PACKAGE...: from Debian, without recommends
  echo "setup: installing $* from Debian"
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need_uv() {
  UV="$(command -v uv || true)"
  if [ -z "$UV" ]; then
    if [ ! -x .tools/uv/bin/uv ]; then
      echo "setup: installing uv into .tools/uv"
      python3 -m pip install --quiet --disable-pip-version-check --target .tools/uv uv
    fi
    UV="$PWD/.tools/uv/bin/uv"
    export PYTHONPATH="$PWD/.tools/uv${PYTHONPATH:+:$PYTHONPATH}"
  fi

  PY312=""
  if command -v python3.12 >/dev/null 2>&1 && python3.12 -c "" >/dev/null 2>&1; then
    PY312="$(command -v python3.12)"
  elif command -v pyenv >/dev/null 2>&1; then
    for candidate in "$(pyenv root)"/versions/3.12*/bin/python3.12; do
      [ -x "$candidate" ] && PY312="$candidate"
    done
  fi
  if [ -z "$PY312" ]; then  # one uv manages already; uv would otherwise try to download a build
    PY312="$("$UV" python find --no-python-downloads 3.12 2>/dev/null || true)"
  fi
  if [ -z "$PY312" ]; then
    echo "setup: error: no Python 3.12 found (python3.12 on PATH, pyenv or uv); install one, e.g. 'pyenv install 3.12'" >&2
    exit 2
  fi
}

have() { command -v "$1" >/dev/null 2>&1; }

# debian_needs JOB: the Debian packages JOB needs that this machine lacks, on one line. No function here
# is named after a program: `command -v chromium` would find the function itself.
debian_needs() {
  local need=()
  case "$1" in core|bench|conformance|test|all)
    [ -x /usr/lib/chromium/chromium ] || need+=(chromium)
    # what Playwright launches for headless=True: the same build without the browser's UI, half the CPU
    [ -x /usr/lib/chromium/chromium-headless-shell ] || need+=(chromium-headless-shell)
    ;;
  esac
  case "$1" in test|all)
    have tmux || need+=(tmux)
    # the WebArena stand-ins' wikipedia is the real software WebArena uses: kiwix-serve over a ZIM we build
    have kiwix-serve || need+=(kiwix-tools)
    have zimwriterfs || need+=(zim-tools)
    ;;
  esac
  case "$1" in conformance|test|all)
    # DokuWiki, served by PHP's built-in server (php-cgi satisfies the php package without Apache)
    { [ -f /usr/share/dokuwiki/doku.php ] && have php && have php-cgi; } || need+=(php-cli php-cgi php-xml dokuwiki)
    ;;
  esac
  case "$1" in bench|conformance|test|all)
    # TiddlyWiki and docsify from npm, served by Node
    { have node && have npm; } || need+=(nodejs npm)
    ;;
  esac
  echo "${need[*]:-}"
}

system_packages() {
  local need
  need="$(debian_needs "$1")"
  # shellcheck disable=SC2086 # one word per package
  [ -z "$need" ] || apt_install $need
}

# uv sync --inexact leaves what another job installed in .venv (make demo after make test keeps pytest).
venv_core() {
  need_uv
  "$UV" sync --locked --inexact --no-default-groups --quiet --python "$PY312"
}

venv_docs() {
  need_uv
  "$UV" sync --locked --inexact --no-default-groups --group docs --quiet --python "$PY312"
}

test_tools() {
  need_uv
  # the openhands extra, the dev group (pytest, ruff, mypy) and the docs group (the suite builds the site)
  "$UV" sync --locked --all-extras --group docs --quiet --python "$PY312"
  # OpenHands V1 (current openhands-sdk / openhands-tools and the browser-use they work with) in a venv of
  # its own, .venv-v1, from its own lock: openhands-ai 1.6.0 (V0, in .venv) pins the old SDK. This project
  # is installed there too (editable, without the openhands extra), so capture and scoring work in it.
  UV_PROJECT_ENVIRONMENT="$PWD/.venv-v1" "$UV" sync --locked --quiet --python "$PY312" \
    --project evaluation/benchmarks/webarena/v1env
}

tiddlywiki_app() {  # TiddlyWiki from npm (node and npm from Debian), once into .cache/apps/tiddlywiki
  if [ ! -f .cache/apps/tiddlywiki/node_modules/tiddlywiki/tiddlywiki.js ]; then
    echo "setup: installing TiddlyWiki from npm into .cache/apps/tiddlywiki"
    npm install --prefix .cache/apps/tiddlywiki --no-audit --no-fund --loglevel=error "tiddlywiki@5.4.1" >/dev/null
  fi
}

conformance_apps() {
  need_uv
  # The real applications of the conformance suite (tests/conformance): DokuWiki from Debian (served by
  # PHP's built-in server from a private copy in a temp dir; php-cgi satisfies the php package without
  # pulling in Apache) and Trac from PyPI in its own virtualenv, with a pristine environment made once.
  APPS=.cache/apps
  if [ ! -x "$APPS/trac-venv/bin/tracd" ]; then
    echo "setup: installing Trac from PyPI into $APPS/trac-venv (conformance suite)"
    "$UV" venv --quiet --python .venv/bin/python "$APPS/trac-venv"
    "$UV" pip install --quiet --python "$APPS/trac-venv/bin/python" \
      "trac==1.6" "Jinja2==3.1.6" "MarkupSafe==3.0.4" "setuptools==80.10.2"
  fi
  if [ ! -f "$APPS/trac-env/VERSION" ]; then
    echo "setup: creating the pristine Trac environment $APPS/trac-env"
    rm -rf "$APPS/trac-env.tmp"
    PYTHONWARNINGS=ignore "$APPS/trac-venv/bin/trac-admin" "$APPS/trac-env.tmp" initenv "Conformance" \
      sqlite:db/trac.db >/dev/null
    PYTHONWARNINGS=ignore "$APPS/trac-venv/bin/trac-admin" "$APPS/trac-env.tmp" wiki import \
      ConformanceFacts tests/conformance/trac_facts.wiki >/dev/null
    mv "$APPS/trac-env.tmp" "$APPS/trac-env"
  fi
  # Two more for the conformance suite: TiddlyWiki from npm (a single-page application served by its own
  # Node server; node and npm from Debian) and Django from PyPI with the waitress WSGI server (the admin of
  # the small site in tests/conformance/django_site), each installed once into .cache/apps.
  tiddlywiki_app
  if [ ! -d "$APPS/django-venv/lib/python3.12/site-packages/waitress" ]; then
    echo "setup: installing Django from PyPI into $APPS/django-venv (conformance suite)"
    "$UV" venv --quiet --allow-existing --python .venv/bin/python "$APPS/django-venv"
    "$UV" pip install --quiet --python "$APPS/django-venv/bin/python" \
      "django==6.1.3" "asgiref==3.13.0" "sqlparse==0.6.1" "waitress==3.0.2"
  fi
  # The fifth: an SPA from npm that fills itself over XHR and websockets after load, with popups.
  scripts/setup_conformance_spa.sh
}

system_packages "$JOB"
[ -z "$SYSTEM_ONLY" ] || exit 0
case "$JOB" in
  core) venv_core ;;
  docs) venv_docs ;;
  bench) venv_core; tiddlywiki_app ;;
  conformance) venv_core; conformance_apps ;;
  test|all) test_tools; conformance_apps ;;
esac
[ "$JOB" = docs ] || .venv/bin/python -m cdp_integration.environment
