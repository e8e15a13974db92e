# The two commands of the README: `make demo` and `make test`. Both set up what is missing first.
.PHONY: setup demo test check-wheel bench lint

setup:
	@scripts/setup.sh

demo: setup
	.venv/bin/cdp-session demo

test: setup
	.venv/bin/python -m pytest -q --durations=25

# A plain-pip install of the built wheel in a fresh venv scores the golden sessions (needs PyPI).
check-wheel:
	@scripts/check_wheel.sh

bench: setup
	.venv/bin/python benchmarks/cli_startup.py
	.venv/bin/python benchmarks/capture_overhead.py
	.venv/bin/python benchmarks/offline_vs_live.py --keep .cache/bench-sessions
	.venv/bin/python benchmarks/eval_throughput.py --sessions .cache/bench-sessions --count 2000

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy
