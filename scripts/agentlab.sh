#!/usr/bin/env bash
# AgentLab 0.4.2 for the import tests, in .cache/agentlab (idempotent). Installed without its
# dependencies on top of the project's environment: its full set pins torch with CUDA (gigabytes) and
# BrowserGym 0.14; what ExpArgs.run needs beyond the project's BrowserGym 0.13.3 is these few.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=.cache/agentlab
[ -f "$TARGET/.complete" ] && exit 0
UV="$(command -v uv || true)"
if [ -z "$UV" ]; then
  UV="$PWD/.tools/uv/bin/uv"
  export PYTHONPATH="$PWD/.tools/uv${PYTHONPATH:+:$PYTHONPATH}"
fi
rm -rf "$TARGET"
"$UV" pip install --quiet --no-deps --target "$TARGET" --python .venv/bin/python \
  agentlab==0.4.2 browsergym-experiments==0.13.3 dataclasses-json==0.6.7 marshmallow==3.26.2 typing-inspect==0.9.0
touch "$TARGET/.complete"
echo "agentlab: AgentLab 0.4.2 in $TARGET"
