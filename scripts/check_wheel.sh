#!/usr/bin/env bash
# What a pip user does: build the wheel, `pip install` it with plain pip into a fresh Python 3.12 venv
# (no uv, no overrides, no extras), run `cdp-session setup`, then score the golden demo sessions with
# `cdp-session eval`; every session must score and offline must equal live. Needs PyPI; pip's cache is
# kept in .cache/pip so a second run downloads nothing. Everything else lives in a temp dir, removed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY312=""
if command -v python3.12 >/dev/null 2>&1 && python3.12 -c "" >/dev/null 2>&1; then
  PY312="$(command -v python3.12)"
elif command -v pyenv >/dev/null 2>&1; then
  for candidate in "$(pyenv root)"/versions/3.12*/bin/python3.12; do
    [ -x "$candidate" ] && PY312="$candidate"
  done
fi
[ -n "$PY312" ] || { echo "check-wheel: no Python 3.12 found" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/cdp-check-wheel-XXXXXX")"
trap 'rm -rf "$work"' EXIT
export PIP_CACHE_DIR="$PWD/.cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
export XDG_CACHE_HOME="$work/xdg-cache" HOME="$work/home"  # the user cache dir a pip install writes to
mkdir -p "$HOME"

"$PY312" -m pip wheel --quiet --no-deps . -w "$work/dist"
"$PY312" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet "$work"/dist/cdp_integration-*.whl
"$work/venv/bin/pip" list 2>/dev/null | grep -iE '^(openhands-ai|beartype|pydantic|openai) ' || true

"$work/venv/bin/cdp-session" setup
[ -d "$XDG_CACHE_HOME/cdp-integration/nltk_data/tokenizers/punkt_tab/english" ] \
  || { echo "check-wheel: setup did not write under \$XDG_CACHE_HOME/cdp-integration" >&2; exit 1; }

"$work/venv/bin/cdp-session" eval tests/fixtures/sessions/v1 -o "$work/eval" 2>/dev/null | tail -n 8
"$work/venv/bin/python" - "$work/eval/output.jsonl" tests/fixtures/sessions/v1/expected.json <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
expected = json.load(open(sys.argv[2]))
assert len(rows) == len(expected), (len(rows), len(expected))
bad = []
for row in rows:
    name = row["metadata"]["session_path"]
    result, want = row["test_result"], expected[name]
    if result["error"] or (result["score"], result["max_score"]) != (want["live"], want["live_max"]):
        bad.append(f"{name}: {result['error'] or (result['score'], result['max_score'])}")
if bad:
    sys.exit("check-wheel: " + "; ".join(bad))
print(f"check-wheel: {len(rows)} golden sessions scored by the pip-installed wheel, all equal to live")
EOF
