#!/usr/bin/env bash
# browser-use's current release line (0.13.x) standalone in a virtualenv of its own, .venv-bu013, from its
# own lock (evaluation/benchmarks/webarena/bu013env), with this project installed editable. The project's
# .venv (openhands-ai 1.6.0) and .venv-v1 (openhands-tools 1.58) both keep browser-use 0.11.x.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || scripts/setup.sh   # the main environment first (Chromium, uv, Python 3.12)
UV="$(command -v uv || true)"
if [ -z "$UV" ]; then
  UV="$PWD/.tools/uv/bin/uv"
  export PYTHONPATH="$PWD/.tools/uv${PYTHONPATH:+:$PYTHONPATH}"
fi
PY312="$(.venv/bin/python -c 'import sys; print(sys._base_executable)')"
UV_PROJECT_ENVIRONMENT="$PWD/.venv-bu013" "$UV" sync --locked --quiet --python "$PY312" \
  --project evaluation/benchmarks/webarena/bu013env
