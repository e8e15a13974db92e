#!/usr/bin/env bash
# BrowserGym 0.14.3 and AgentLab 0.4.2 in a virtualenv of their own, .venv-bg014, from their own lock
# (evaluation/benchmarks/webarena/bg014env), with this project installed editable: its .pth switch
# (WEBARENA_CDP_LOGGING=true) then records inside every BrowserGym env there, AgentLab studies included.
# The project's own .venv keeps BrowserGym 0.13.3 (OpenHands 1.6.0's pin), hence a second environment.
# AgentLab's heavy requirements (torch with CUDA, Ray, Dask, Gradio) are left out by the lock's overrides:
# a study run with the sequential backend imports none of them. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || scripts/setup.sh   # the main environment first (Chromium, uv, Python 3.12)
UV="$(command -v uv || true)"
if [ -z "$UV" ]; then
  UV="$PWD/.tools/uv/bin/uv"
  export PYTHONPATH="$PWD/.tools/uv${PYTHONPATH:+:$PYTHONPATH}"
fi
PY312="$(.venv/bin/python -c 'import sys; print(sys._base_executable)')"
UV_PROJECT_ENVIRONMENT="$PWD/.venv-bg014" "$UV" sync --locked --quiet --python "$PY312" \
  --project evaluation/benchmarks/webarena/bg014env
