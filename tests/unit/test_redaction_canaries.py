"""No canary leaves in any export: the session schema walked, every exporter run, every byte decoded.

``tests/canaries.py`` plants canaries in every string field of the session schema (and declares some
as the session's own secrets, recurring everywhere in every encoding); each command that writes
session data for others is run the way a user shares with it, and its outputs are searched after
decoding gzip, zip, Parquet, HTML entities, URL-encoding, JSON escapes and base64.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.session import load_session
from tests.canaries import Planter, canary_session, find_canaries, schema_fields
from tests.unit.test_redact import write

SHARED_BY = {
    "redact": "the redacted copy itself",
    "export-dataset": "redacts by default (Parquet rows, card, sessions)",
    "export-verified": "--redact, and its --submission package",
    "import": "--redact (the default), also `import dataset` and `import verified`",
    "har": "a HAR of the redacted copy",
    "view": "the HTML viewer of the redacted copy",
    "export-wabe": "WABE's layout of the redacted copy",
    "eval": "report.html, report.md and output.jsonl of the redacted copies",
    "compare": "the comparison of two scorings of the redacted copies",
}
"""Every command that writes session data to a file, and how the test shares through it."""

NOT_SHARING = {
    "demo": "plays the bundled demo; writes captures, not a share",
    "record": "captures a browser; writes a session, not a share",
    "schema": "writes the JSON Schema, no session data",
    "show": "prints one step to the terminal (--json/--html to stdout), not a file to share",
}


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Planter, set[str]]:
    root = tmp_path_factory.mktemp("canaries")
    session, plant, fields = canary_session()
    (root / "run").mkdir()
    write(session, root / "run" / "canary.session.jsonl.gz")
    return root, plant, fields


@pytest.fixture(scope="module")
def shared(planted: tuple[Path, Planter, set[str]]) -> dict[str, Path]:
    """What each exporter wrote, the way a user shares with it."""
    root, _plant, _fields = planted
    run, original = root / "run", root / "run" / "canary.session.jsonl.gz"
    out = {}
    (root / "redacted").mkdir()
    redacted = root / "redacted" / "canary.session.jsonl.gz"
    _run("redact", str(original), "-o", str(redacted))
    out["redact"] = redacted
    _run("export-dataset", str(run), "-o", str(root / "dataset"))
    out["export-dataset"] = root / "dataset"
    _run(
        "export-verified", str(original), "-o", str(root / "verified"), "--redact",
        "--submission", str(root / "submission"), "--name", "canary",
    )  # fmt: skip
    out["export-verified"] = root / "verified"
    out["export-verified --submission"] = root / "submission"
    _run("export-dataset", str(run), "-o", str(root / "dataset-plain"), "--no-redact")
    _run("import", "dataset", str(root / "dataset-plain"), "-o", str(root / "taken"), "--redact")
    out["import dataset --redact"] = root / "taken"
    out["export-dataset --no-redact"] = root / "dataset-plain"
    _run("import", "dataset", str(root / "dataset-plain"), "-o", str(root / "taken-plain"), "--no-redact")
    out["import dataset --no-redact"] = root / "taken-plain"
    _run("export-verified", str(original), "-o", str(root / "verified-plain"))
    out["export-verified (no --redact)"] = root / "verified-plain"
    _run("import", "verified", str(root / "verified-plain"), "-o", str(root / "imported"), "--redact")
    out["import verified --redact"] = root / "imported"
    _run(
        "import", "verified", str(root / "verified-plain"), "-o", str(root / "imported-plain"), "--no-redact"
    )
    out["import verified --no-redact"] = root / "imported-plain"
    _run("har", str(redacted), "-o", str(root / "canary.har"), "--include-evaluator")
    out["har"] = root / "canary.har"
    _run("view", str(redacted), "-o", str(root / "canary.html"))
    out["view"] = root / "canary.html"
    _run("export-wabe", str(redacted), "-o", str(root / "wabe"))
    out["export-wabe"] = root / "wabe"
    CliRunner().invoke(cli, ["eval", str(root / "redacted"), "-o", str(root / "eval"), "--allow-unscored"])
    shutil.copytree(root / "eval", root / "eval-again")
    out["eval"] = root / "eval"
    _run("compare", str(root / "eval"), str(root / "eval-again"), "-o", str(root / "compare"))
    out["compare"] = root / "compare"
    return out


def test_the_walk_reaches_every_field_of_the_session_schema(planted: tuple[Path, Planter, set[str]]) -> None:
    _root, _plant, fields = planted
    assert schema_fields() - fields == set()


def test_every_command_that_writes_session_data_is_shared_through() -> None:
    context = click.Context(cli)
    writers = {
        name
        for name in cli.list_commands(context)
        if any(
            isinstance(param, click.Option) and {"-o", "--html", "--json"} & set(param.opts)
            for param in cli.get_command(context, name).params  # type: ignore[union-attr]
        )
    }
    assert writers == set(SHARED_BY) | set(NOT_SHARING)


def test_the_canaries_are_in_the_original(planted: tuple[Path, Planter, set[str]]) -> None:
    """The search finds what was planted (no test that cannot fail): every canary is in the file."""
    root, plant, _fields = planted
    found = find_canaries(root / "run", plant.planted)
    assert len(found) == len(plant.planted)


SHARES = [
    *sorted(SHARED_BY),
    "export-verified --submission",
    "import dataset --redact",
    "import verified --redact",
]


@pytest.mark.parametrize("exporter", SHARES)
def test_no_canary_in_what_is_shared(
    exporter: str, planted: tuple[Path, Planter, set[str]], shared: dict[str, Path]
) -> None:
    _root, plant, _fields = planted
    if exporter == "import":
        return  # its two modes are the two ``import ... --redact`` cases
    output = shared[exporter]
    assert output.exists() and (output.is_file() or any(output.rglob("*")))
    canaries = plant.planted
    if exporter == "import verified --redact":  # a Verified run holds no form state: nothing there
        canaries = {c: w for c, w in canaries.items() if plant.declared.get(c) != "typed"}  # says it is one
    leaked = find_canaries(output, canaries)
    assert not leaked, f"{len(leaked)} canaries leaked through {exporter}:\n" + "\n".join(leaked)


def test_the_redacted_copy_still_loads_with_every_step(
    planted: tuple[Path, Planter, set[str]], shared: dict[str, Path]
) -> None:
    root, _plant, _fields = planted
    original = load_session(root / "run" / "canary.session.jsonl.gz")
    redacted = load_session(shared["redact"])
    assert len(redacted.steps) == len(original.steps) and redacted.end is not None


REDACT_FLAGS = {
    "export-dataset": ("export-dataset", "export-dataset --no-redact"),
    "export-verified": ("export-verified", "export-verified (no --redact)"),
    "import": ("import dataset --redact", "import dataset --no-redact"),
    "import verified": ("import verified --redact", "import verified --no-redact"),
}
"""Each command with a ``--redact`` flag: (its output with it, its output without)."""


def test_every_command_with_a_redact_flag_is_tested() -> None:
    context = click.Context(cli)
    flagged = {
        name
        for name in cli.list_commands(context)
        if any("--redact" in param.opts for param in cli.get_command(context, name).params)  # type: ignore[union-attr]
    }
    assert flagged == {name.split()[0] for name in REDACT_FLAGS}


@pytest.mark.parametrize("command", sorted(REDACT_FLAGS))
def test_every_redact_flag_is_honoured_both_ways(
    command: str, planted: tuple[Path, Planter, set[str]], shared: dict[str, Path]
) -> None:
    """With the flag no declared secret is left; without it they are all there (the flag decides)."""
    _root, plant, _fields = planted
    declared = {c: w for c, w in plant.planted.items() if c in plant.declared}
    if command == "import verified":  # a Verified run holds no form state
        declared = {c: w for c, w in declared.items() if plant.declared[c] != "typed"}
    with_flag, without = REDACT_FLAGS[command]
    assert find_canaries(shared[with_flag], declared) == []
    assert len(find_canaries(shared[without], declared)) == len(declared)
