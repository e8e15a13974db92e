#!/usr/bin/env bash
# Set up everything on a fresh machine: Debian Chromium (+ tmux), uv, a Python 3.12 venv in .venv with the
# locked dependencies, and the data third-party code expects (Playwright browser layout, NLTK punkt_tab).
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -x /usr/lib/chromium/chromium ] || command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} from Debian"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

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
[ -n "$PY312" ] || PY312="3.12"   # let uv find or fetch one

"$UV" sync --locked --all-extras --quiet --python "$PY312"   # the openhands extra too: the tests need it
.venv/bin/python -m cdp_integration.environment
