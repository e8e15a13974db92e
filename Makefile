# The two commands of the README: `make demo` and `make test`. Each sets up what its job needs first
# (scripts/setup.sh core|test|docs|conformance): `make demo` installs no test tool and no conformance app.
.PHONY: test-fresh-machine setup setup-demo setup-test setup-docs setup-bench setup-conformance demo test docs test-webarena test-imports trace-corpus test-agentlab test-browser-use \
	test-conformance test-faults test-openhands test-hostile check-fidelity check-fidelity-browser-use check-wheel bench bench-webarena bench-ray test-ray lint

# Python caches compiled bytecode under .cache/pycache for every command here, whatever the shell says: an
# environment with PYTHONDONTWRITEBYTECODE set makes each of the suite's Python processes compile the
# evaluator stack again (about 2.5 CPU-s each, measured), and the prefix keeps the cache inside the clone.
export PYTHONPYCACHEPREFIX := $(CURDIR)/.cache/pycache
unexport PYTHONDONTWRITEBYTECODE

setup:
	@scripts/setup.sh all
setup-demo:
	@scripts/setup.sh core
setup-test:
	@scripts/setup.sh test
setup-docs:
	@scripts/setup.sh docs
setup-bench:
	@scripts/setup.sh bench
setup-conformance:
	@scripts/setup.sh conformance

demo: setup-demo
	.venv/bin/cdp-session demo

# The documentation site (mkdocs.yml, docs/) into site/; strict: a broken link or reference fails.
docs: setup-docs
	.venv/bin/mkdocs build --strict

# The suite runs whole test modules in two pytest-xdist workers (tests/conftest.py) while background
# processes record the demo corpus. `make test TEST_WORKERS=` runs it in one process. No test depends on
# BrowserGym's 500 ms action timeout: the scripted agents run BrowserGym's actions with a longer one.
TEST_WORKERS ?= 2
XDIST = $(if $(TEST_WORKERS),-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder)

test: setup-test
	.venv/bin/python -m pytest -q --durations=25 $(XDIST)

# The README's set-up where nothing is installed (tests/integration/test_fresh_machine.py, root only): make test
# runs each job's Debian step and make demo's whole set-up and one demo task; this adds the test job's whole
# set-up (two venvs and five applications, about 1.5 min with warm package caches).
test-fresh-machine: setup-test
	CDP_TEST_FRESH_FULL=1 .venv/bin/python -m pytest -q --durations=10 tests/integration/test_fresh_machine.py

# Real WebArena task ids against the stand-in sites (issue 11), too long for `make test`: the live parity
# of all 41 curated tasks (82 episodes in BrowserGym's own webarena envs, then scored offline) and
# run_infer.py --dataset webarena end to end (direct and agent mode) with eval_infer on its output.
# OpenHands V1 (.venv-v1) on all 41 ids too: run_infer --sdk v1 --dataset webarena, success and failure,
# and the V1 tools we add (select an option, press a key) on a live page.
# run_infer --backend ray over a pool of two stand-in deployments (a 2-node Ray cluster on this machine,
# sessions in moto's S3) on all 41 ids too; `make test-ray` runs 8 of them.
test-webarena: setup-test
	CDP_TEST_WEBARENA_TASKS=all CDP_TEST_RUN_INFER_WEBARENA=1 CDP_TEST_WEBARENA_V1=all CDP_TEST_RAY_TASKS=all \
		.venv/bin/python -m pytest -q \
		--durations=10 tests/integration/test_webarena_parity.py tests/integration/test_webarena_run_infer.py \
		tests/integration/test_webarena_v1.py tests/integration/test_v1_tools.py tests/integration/test_ray_pool.py

# Imports of other tools' recordings at full size: Playwright traces of every demo task (the corpus
# traces them all), a real AgentLab study (AgentLab 0.4.2 in .cache/agentlab, see scripts/agentlab.sh),
# and 12 browser-use histories (`make test` imports 6: each run costs ~20 s); the whole corpus as a dataset
# (export-dataset, load_dataset, import dataset, eval: every row scores as live, no secret in the folder);
# and the parity of all 90 corpus episodes, every failure's class claims asked again of the evaluator.
test-imports: setup-test
	scripts/agentlab.sh
	CDP_TEST_IMPORTS_FULL=1 CDP_TEST_AGENTLAB=1 .venv/bin/python -m pytest -q --durations=10 -s \
		tests/integration/test_imports.py tests/integration/test_import_agentlab.py \
		tests/integration/test_dataset_roundtrip.py tests/integration/test_parity.py
	CDP_TEST_IMPORTS_FULL=1 .venv/bin/python -m pytest -q --durations=10 -s tests/integration/test_browser_use.py \
		-k "imported_histories or offline_score"

# Record the Playwright trace corpus (tests/fixtures/traces) again: demo episodes traced by Python Playwright
# 1.32.1 (WebArena's pin), 1.45.1 and 1.65.2 and by @playwright/test 1.65.1, each installed in its own
# environment under .cache/trace-producers, scored live by the official evaluator.
trace-corpus: setup
	.venv/bin/python scripts/make_trace_corpus.py

# BrowserGym 0.14.3 and AgentLab 0.4.2 live (.venv-bg014, scripts/setup_bg014.sh): a real AgentLab study of six
# stand-in tasks (webarena and webarena_verified families) recorded by WEBARENA_CDP_LOGGING=true, scored offline
# against AgentLab's live rewards, Verified on our HAR against Verified on BrowserGym's own trace (~4-6 min).
test-agentlab: setup
	scripts/setup_bg014.sh
	CDP_TEST_AGENTLAB_BG014=1 .venv/bin/python -m pytest -q --durations=10 -s tests/integration/test_agentlab_bg014.py

# browser-use's current release (0.13.x, .venv-bu013, scripts/setup_browser_use.sh) on the demo shop and the
# WebArena stand-ins: captured over CDP, plain-HTTP HAR with wire headers, offline == live, imported histories.
test-browser-use: setup
	scripts/setup_browser_use.sh
	CDP_TEST_BROWSER_USE_STANDINS=1 .venv-bu013/bin/python -m pytest -q --durations=10 \
		tests/integration/test_browser_use.py tests/integration/test_browser_use_standins.py \
		tests/integration/test_trajectories_browser_use.py

# Fault injection with every scenario (make test plays three: CDP errors, a hung tab, a crash with a full
# disk; and one SIGKILL, mid-write): 21 demo episodes with CDP errors, closed, crashed, hung and navigated tabs, a full disk, and two
# SIGKILLs; and a SIGKILL between two steps of a BrowserGym episode.
test-faults: setup-test
	CDP_TEST_FAULTS=all .venv/bin/python -m pytest -q --durations=10 -s tests/integration/test_fault_injection.py \
		tests/integration/test_capture_browsergym.py::test_sigkill_mid_episode_leaves_completed_steps_readable

# OpenHands at full length: V0's whole agent loop (run_infer.py then eval_infer.py on its output; `make test`
# plays it through the OpenHands guide's example), a BrowserEnv episode with WEBARENA_CDP_LOGGING unset
# (nothing written), run_infer --sdk v1's failing trajectory (make test plays the succeeding one) and
# run_infer --sdk v1 against a model behind an OpenAI-compatible endpoint.
test-openhands: setup-test
	CDP_TEST_OPENHANDS_FULL=1 .venv/bin/python -m pytest -q --durations=10 tests/integration/test_openhands.py \
		tests/integration/test_openhands_v1.py tests/integration/test_v1_real_model.py

# Hostile input at full size: the generated cases of every input surface with three seeds (make test: one),
# and the loaders' property tests with four times make test's case counts.
test-hostile: setup-test
	CDP_HOSTILE_FULL=1 .venv/bin/python -m pytest -q --durations=10 -n $(or $(TEST_WORKERS),1) \
		tests/unit/test_hostile_generator.py tests/unit/test_fuzz_loader.py

# The conformance suite on its four real applications with every task, the opt-in ones too (issue 19).
test-conformance: setup-test
	CDP_TEST_CONFORMANCE=all .venv/bin/python -m pytest -q tests/conformance

# The differential fidelity checker at full size (tests/conformance/differential.py): every episode of the
# conformance apps and the demo shop, questions built from the live DOM at every step answered live and from
# the session; prints questions / equal / loud misses / silent differences per app and every silent
# difference, then scores the sessions with `cdp-session eval` forward, reversed and shuffled. Exit 1 on any
# silent difference or order-dependent score. FIDELITY_ARGS="--apps trac --seed 3" narrows or varies it.
# Then generated trajectories (tests/trajectories.py): 300 seeded random episodes (tabs opened, switched
# and closed, history, routes, forms, iframes; plain pages and a BrowserGym env) over the bundled trajectory
# site, the demo shop and the conformance apps, scored live on the agent's current tab and offline from
# each session (recorded and reconstructed); counts per app and behaviour. TRAJECTORY_ARGS="--seed 7".
# Both always run; exit 1 if either finds a silent difference.
FIDELITY_ARGS ?=
TRAJECTORY_ARGS ?=
check-fidelity: setup-test
	@status=0; \
	.venv/bin/python scripts/differential_check.py $(FIDELITY_ARGS) || status=1; \
	.venv/bin/python scripts/trajectory_check.py $(TRAJECTORY_ARGS) || status=1; \
	exit $$status

# Generated trajectories played by a real browser_use.Agent (browser-use 0.13, .venv-bu013) on the bundled
# site and the demo shop, judged like check-fidelity's.
BROWSER_USE_TRAJECTORY_ARGS ?= --episodes 60
check-fidelity-browser-use: setup-test
	scripts/setup_browser_use.sh
	.venv-bu013/bin/python scripts/trajectory_check.py --apps browser_use,browser_use_demo $(BROWSER_USE_TRAJECTORY_ARGS)

# A plain-pip install of the built wheel in a fresh venv scores the golden sessions (needs PyPI).
check-wheel:
	@scripts/check_wheel.sh

# Every benchmark runs even when an earlier one misses a target; the exit status says whether any did.
# The results go to docs/benchmarks/latest.md (and latest.json), which the docs' Benchmarks page includes.
# BENCH_ARGS="--only cli_startup eval_throughput" runs a subset (the others are listed as not run).
BENCH_ARGS ?=
bench: setup-bench
	.venv/bin/python benchmarks/run_all.py $(BENCH_ARGS)

# run_infer --backend ray over a pool of two stand-in deployments on a 2-node Ray cluster on this machine,
# sessions in moto's S3, on a covering subset of 8 curated ids (make test-webarena runs all 41).
test-ray: setup-test
	CDP_TEST_RAY_TASKS=subset .venv/bin/python -m pytest -q --durations=10 tests/integration/test_ray_pool.py

# run_infer --sdk v1 on the 41 curated ids with --num-workers 1 then 2 (~10 min): both wall times, the
# ratio, and whether every task got the same score (exit 1 if not).
bench-webarena: setup-test
	.venv/bin/python benchmarks/webarena_parallel.py

# run_infer --backend ray with 1 vs 2 stand-in deployments on a 2-node local Ray cluster (ratio), and eval
# of 2000 sessions from S3 (moto) with local workers vs Ray workers, side by side.
bench-ray: setup-test
	.venv/bin/python benchmarks/run_all.py --only ray_pool

lint: setup-test
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy
