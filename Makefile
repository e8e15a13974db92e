# The two commands of the README: `make demo` and `make test`. Both set up what is missing first.
.PHONY: setup demo test test-webarena check-fidelity check-wheel bench lint

setup:
	@scripts/setup.sh

demo: setup
	.venv/bin/cdp-session demo

# The suite runs in one pytest process while three background processes record the demo corpus.
# `make test TEST_WORKERS=2` spreads whole test modules over that many pytest-xdist workers
# (tests/conftest.py): ~16 min instead of ~20 here, but on 2 CPUs the extra load makes the timing of
# OpenHands' runtime start-up (a fixed 120 s limit) and of BrowserGym episodes less reliable.
TEST_WORKERS ?=
XDIST = $(if $(TEST_WORKERS),-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder)

test: setup
	.venv/bin/python -m pytest -q --durations=25 $(XDIST)

# Real WebArena task ids against the stand-in sites (issue 11), too long for `make test`: the live parity
# of all 41 curated tasks (82 episodes in BrowserGym's own webarena envs, then scored offline) and
# run_infer.py --dataset webarena end to end (direct and agent mode) with eval_infer on its output.
test-webarena: setup
	CDP_TEST_WEBARENA_TASKS=all CDP_TEST_RUN_INFER_WEBARENA=1 .venv/bin/python -m pytest -q --durations=10 \
		tests/integration/test_webarena_parity.py tests/integration/test_webarena_run_infer.py

# The differential fidelity checker at full size (tests/conformance/differential.py): every episode of the
# conformance apps and the demo shop, questions built from the live DOM at every step answered live and from
# the session; prints questions / equal / loud misses / silent differences per app and every silent
# difference, then scores the sessions with `cdp-session eval` forward, reversed and shuffled. Exit 1 on any
# silent difference or order-dependent score. FIDELITY_ARGS="--apps trac --seed 3" narrows or varies it.
FIDELITY_ARGS ?=
check-fidelity: setup
	.venv/bin/python scripts/differential_check.py $(FIDELITY_ARGS)

# A plain-pip install of the built wheel in a fresh venv scores the golden sessions (needs PyPI).
check-wheel:
	@scripts/check_wheel.sh

# Every benchmark runs even when an earlier one misses a target; the exit status says whether any did.
bench: setup
	@status=0; \
	.venv/bin/python benchmarks/cli_startup.py || status=1; \
	.venv/bin/python benchmarks/capture_overhead.py || status=1; \
	.venv/bin/python benchmarks/offline_vs_live.py --keep .cache/bench-sessions || status=1; \
	.venv/bin/python benchmarks/eval_throughput.py --sessions .cache/bench-sessions --count 2000 || status=1; \
	exit $$status

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy
