#!/usr/bin/env bash
# The conformance suite's single-page handbook: docsify and docsify-cli from npm (node and npm from
# Debian, installed by scripts/setup.sh), installed once into .cache/apps/docsify. Their install
# scripts are skipped: docsify's postinstall only sets up its own development hooks.
set -euo pipefail
cd "$(dirname "$0")/.."
APPS=.cache/apps
if [ ! -f "$APPS/docsify/node_modules/docsify-cli/bin/docsify" ]; then
  echo "setup: installing docsify from npm into $APPS/docsify (conformance suite)"
  mkdir -p "$APPS/docsify"
  npm install --prefix "$APPS/docsify" --ignore-scripts --no-audit --no-fund --loglevel=error \
    "docsify@5.0.0" "docsify-cli@5.0.0" >/dev/null
fi
