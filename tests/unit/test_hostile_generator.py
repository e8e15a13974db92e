"""Every generated hostile input (``tests/hostile_gen.py``) through the real commands, under the budgets.

For each case and command: a fresh ``cdp-session`` process under ``tests/hostile.py``'s limits;
exit 2 with one line on stderr (or, where the case allows it, exit 0: a correct import, an ``eval``
that records the session's error in its output), never a traceback; peak RSS under 1 GiB (900 MB
for the amplification family, issue 27's headroom), under 30 s (stretched by the machine's load);
nothing of the outside folder read into what it wrote (``SECRET``), nothing written there, no
``.partial`` left behind.

``make test`` runs a seeded sample: each case once, one of its commands. The full sweep
(every command, three seeds): ``CDP_HOSTILE_FULL=1``; another sample: ``CDP_HOSTILE_SEED=N``.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import random
import re
import tempfile
from pathlib import Path

import pytest

from tests.hostile import MAX_RSS, run_cli_limited, wall_bound
from tests.hostile_gen import SECRET, Case, Place, all_cases

FULL = os.environ.get("CDP_HOSTILE_FULL") == "1"
SEED = int(os.environ.get("CDP_HOSTILE_SEED", "28"))
SEEDS = (SEED, SEED + 1, SEED + 2) if FULL else (SEED,)
AMPLIFICATION_RSS = 900 * 1024**2


def _tree(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = (
            os.readlink(path).encode()
            if path.is_symlink()
            else path.read_bytes()
            if path.is_file()
            else b"<dir>"
        )
    return out


def _holds_secret(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        with contextlib.suppress(OSError, EOFError):
            data = gzip.decompress(data)
    return SECRET.encode() in data


RUN_INFER = Path(__file__).parents[2] / "evaluation" / "benchmarks" / "webarena" / "run_infer.py"


def _check(case: Case, args: list[str], place: Place, outside_before: dict[str, bytes]) -> None:
    program = RUN_INFER if case.program == "run_infer.py" else None
    run = run_cli_limited(*args, cwd=place.root, timeout=wall_bound() * 2, env=place.env, program=program)
    where = f"{case.name} ({case.family}): {case.program} {' '.join(args)[:300]!r}"
    assert not run.timed_out, f"{where}: still running after {run.seconds:.0f} s"
    assert "Traceback" not in run.stderr, f"{where}:\n{run.stderr[-3000:]}"
    budget = AMPLIFICATION_RSS if case.family == "amplification" else MAX_RSS
    assert 0 <= run.peak_rss < budget, f"{where}: peak RSS {run.peak_rss / 2**20:.0f} MiB"
    assert run.seconds < wall_bound(), f"{where}: {run.seconds:.1f} s"
    lenient = case.may_succeed or args[0] == "eval"
    if args[0] == "eval" and run.returncode == 1:  # the run finished; some session could not be scored
        assert re.search(r"could not be scored|could be scored", run.stderr), (
            f"{where}:\n{run.stderr[-3000:]}"
        )
    elif run.returncode != 0 or not lenient:
        lines = run.stderr.splitlines()
        assert run.returncode == 2, f"{where}: exit {run.returncode}\n{run.stderr[-3000:]}"
        assert len(lines) == 1 and lines[0].startswith(f"{case.program}: error: "), (
            f"{where}:\n{run.stderr[-3000:]}"
        )
        assert "\x1b" not in run.stderr and "\x07" not in run.stderr, f"{where}: {run.stderr!r}"
        assert "hunter2" not in run.stderr + run.stdout, f"{where}: a password was shown: {run.stderr!r}"
        for needle in case.expect:
            assert needle in lines[0], f"{where}: {lines[0]}"
    assert _tree(place.outside) == outside_before, f"{where}: wrote outside its place"
    leaked = [str(p) for p in place.root.rglob("*") if _holds_secret(p)]
    assert not leaked, f"{where}: read the outside file into {leaked}"
    partials = [str(p) for p in place.root.rglob("*.partial") if not p.is_symlink()]
    assert not partials, f"{where}: left {partials}"


def _params() -> list[tuple[Case, int]]:
    return [(case, seed) for case in all_cases() for seed in SEEDS]


@pytest.mark.parametrize(("case", "seed"), _params(), ids=lambda v: v.name if isinstance(v, Case) else str(v))
def test_generated_hostile_input(case: Case, seed: int) -> None:
    rng = random.Random(f"{case.name}:{seed}")
    with tempfile.TemporaryDirectory(prefix="hostile-gen-") as scratch:
        root, outside = Path(scratch, "place"), Path(scratch, "outside")
        root.mkdir()
        outside.mkdir()
        place = Place(root, outside)
        commands = case.build(place, rng)
        if not FULL and len(commands) > 1:
            commands = rng.sample(commands, 1)
        before = _tree(outside)
        for args in commands:
            _check(case, args, place, before)


def test_the_generator_covers_every_format_and_family() -> None:
    cases = all_cases()
    formats = {case.fmt for case in cases}
    assert formats == {
        "session", "run-folder", "har", "trace", "agentlab", "browser-use", "verified", "dataset",
        "argument", "output", "config", "url", "environment", "pool",
    }  # fmt: skip
    families = {case.family for case in cases}
    assert {"amplification", "depth", "types", "encoding", "links", "sizes", "names"} <= families
    assert len({case.name for case in cases}) == len(cases)


def test_names_that_clean_to_one_file_keep_both_answers(tmp_path: Path) -> None:
    """Two histories whose names clean to one file name: two sessions, each with its own answer."""
    from tests.hostile_gen import _history, _history_item

    folder = tmp_path / "h"
    folder.mkdir()
    for name in ("a b", "a_b"):
        item = {**_history_item(0), "result": [{"extracted_content": name}]}
        (folder / f"{name}.json").write_bytes(_history([item]))
    run = run_cli_limited("import", "browser-use", str(folder), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    from cdp_integration.session.store import load_session

    answers = sorted(load_session(p).final_answer or "" for p in (tmp_path / "out").iterdir())
    assert answers == ["a b", "a_b"]


def test_every_input_surface_has_a_hostile_family() -> None:
    """The registry (``tests/surfaces.py``: every location-taking CLI and run_infer.py parameter, every
    environment variable read) against the cases' ``surfaces``: a new option or variable without a
    case fails here, as does a case naming a surface that no longer exists."""
    from tests.surfaces import DYNAMIC_READS, NOT_ATTACKED, all_surfaces, environment_reads

    surfaces = all_surfaces()
    attacked = {surface for case in all_cases() for surface in case.surfaces}
    missing = sorted(surfaces - attacked - set(NOT_ATTACKED))
    assert not missing, (
        f"input surfaces no hostile case attacks (add a Case to tests/hostile_gen.py): {missing}"
    )
    assert not attacked - surfaces, (
        f"cases name surfaces the code does not have: {sorted(attacked - surfaces)}"
    )
    assert not set(NOT_ATTACKED) - surfaces, sorted(set(NOT_ATTACKED) - surfaces)
    assert not set(NOT_ATTACKED) & attacked, sorted(set(NOT_ATTACKED) & attacked)
    _, unresolved = environment_reads()
    assert unresolved == set(DYNAMIC_READS), (
        f"environment reads whose name is computed: declare them in DYNAMIC_READS: {sorted(unresolved)}"
    )


def test_the_registry_sees_a_new_path_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: an option added to a command (here ``info --notes PATH``) is a new surface."""
    import click

    from cdp_integration.cli import cli
    from tests.surfaces import cli_surfaces

    before = cli_surfaces()
    info = cli.commands["info"]
    monkeypatch.setattr(info, "params", [*info.params, click.Option(["--notes"], type=click.Path())])
    assert cli_surfaces() - before == {"cdp-session info notes"}
