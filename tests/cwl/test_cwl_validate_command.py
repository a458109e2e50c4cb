"""`dxts validate`: the same validation and compilation, no server, exit codes and lines."""

from __future__ import annotations

import json
from pathlib import Path

from cwl_support import EXAMPLES, FIXTURES
from typer.testing import CliRunner

from dxts.cli.main import app

runner = CliRunner()
# The project's examples (cwl_support's EXAMPLES are the test fixtures').
PROJECT_EXAMPLES = Path(__file__).parents[2] / "examples"


def lines(output: str) -> list[list[str]]:
    """The problems printed (the verdict line aside)."""
    return [
        line.split("  ", 3)
        for line in output.splitlines()
        if line.startswith(("error  ", "warning  "))
    ]


def verdict(output: str) -> str:
    return output.splitlines()[-1]


def test_a_valid_document_exits_0_with_its_warnings() -> None:
    result = runner.invoke(
        app, ["validate", str(EXAMPLES / "simulation.cwl"), "--allow-unknown-plugins"]
    )
    assert result.exit_code == 0, result.output
    # Whatever is not installed here is a warning, each on a line of its own.
    assert {(s, k) for s, k, _, _ in lines(result.output)} <= {
        ("warning", "unknown-plugin"),
        ("warning", "endless-feeder"),  # its Seeds has no hook to stop it
    }
    assert verdict(result.output).startswith("simulation.cwl: valid, ")


def test_a_clean_document_says_so_in_one_line() -> None:
    """Silence on success left the production manager wondering whether anything ran."""
    result = runner.invoke(app, ["validate", str(PROJECT_EXAMPLES / "mc-demo.cwl")])
    assert (result.exit_code, result.output) == (0, "mc-demo.cwl: valid, 4 members\n")


def test_a_workgraph_that_cannot_end_by_itself_is_warned_about(tmp_path: Path) -> None:
    """Seeds never runs out of inputs: without the Active hook that stops it, the workgraph sits
    Active for good once its work is done. Accepted, with a warning naming the fix."""
    endless = tmp_path / "endless.cwl"
    text = (PROJECT_EXAMPLES / "mc-demo.cwl").read_text()
    hooks = text[text.index("    hooks:\n") : text.index("    data_management:")]
    assert "Active: {hook: OutputTarget" in hooks
    endless.write_text(text.replace(hooks, ""))
    for tool in (PROJECT_EXAMPLES / "tools").iterdir():
        (tmp_path / "tools").mkdir(exist_ok=True)
        (tmp_path / "tools" / tool.name).write_text(tool.read_text())
    result = runner.invoke(app, ["validate", str(endless)])
    assert result.exit_code == 0, result.output
    ((severity, kind, path, message),) = lines(result.output)
    assert (severity, kind, path) == ("warning", "endless-feeder", "inputs.events.dirac:Feeder")
    assert "cannot end by itself" in message
    assert "hooks: {Active: {hook: OutputTarget, args: {target_events: N}}}" in message
    assert "dxts drain WG" in message
    assert verdict(result.output) == "endless.cwl: valid, 4 members (1 warning)"


def test_an_invalid_document_ends_with_its_verdict() -> None:
    result = runner.invoke(
        app,
        ["validate", str(FIXTURES / "invalid" / "several.cwl"), "--bundle", str(FIXTURES)],
    )
    assert result.exit_code == 1
    errors = sum(line[0] == "error" for line in lines(result.output))
    assert verdict(result.output) == f"several.cwl: {errors} errors, not accepted"


def test_an_unknown_plugin_is_an_error_without_the_flag() -> None:
    result = runner.invoke(
        app,
        ["validate", str(FIXTURES / "invalid" / "unknown-plugin.cwl"), "--bundle", str(FIXTURES)],
    )
    assert result.exit_code == 1
    found = lines(result.output)
    assert ["error", "unknown-plugin", "steps.merge.hints.dirac:Transformation.packer.name"] in [
        line[:3] for line in found
    ]
    assert all(len(line) == 4 and line[0] in ("error", "warning") for line in found)


def test_an_invalid_document_prints_every_problem_and_exits_1() -> None:
    result = runner.invoke(
        app,
        [
            "validate",
            str(FIXTURES / "invalid" / "several.cwl"),
            "--bundle",
            str(FIXTURES),
            "--allow-unknown-plugins",
        ],
    )
    assert result.exit_code == 1
    found = {(s, k, p) for s, k, p, _ in lines(result.output)}
    assert {f for f in found if f[0] == "error"} == {
        ("error", "bare-step", "steps.sim.hints"),
        ("error", "unknown-source", "steps.merge.in.input-data"),
        ("error", "orphan-output", "steps.sim.out.sim-files"),
        ("error", "no-driving-input", "steps.merge.in"),
    }
    assert ("warning", "unknown-plugin", "steps.merge.hints.dirac:Transformation.packer.name") in (
        found
    )


def test_a_step_name_with_a_slash_is_a_problem_not_a_traceback() -> None:
    document = FIXTURES / "invalid" / "step-name-slash.cwl"
    result = runner.invoke(app, ["validate", str(document), "--bundle", str(FIXTURES)])
    assert result.exit_code == 1, result.output
    assert ["error", "invalid-name", "steps.s/im"] in [line[:3] for line in lines(result.output)]
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


def test_a_document_outside_the_bundle_is_refused() -> None:
    result = runner.invoke(
        app, ["validate", str(EXAMPLES / "simulation.cwl"), "--bundle", str(FIXTURES / "invalid")]
    )
    assert result.exit_code == 2


def test_the_plan_as_json() -> None:
    result = runner.invoke(
        app,
        [
            "validate",
            str(EXAMPLES / "sprucing.cwl"),
            "--allow-unknown-plugins",
            "--plan",
            "--output",
            "json",
        ],
    )
    assert result.exit_code == 0
    text = result.output[result.output.index("{") :]
    plan = json.loads(text)
    assert plan["scouts"] is True
    assert [(m["name"], m["initial_state"]) for m in plan["members"]] == [
        ("sprucing", "Active"),
        ("merge", "Active"),
        ("StagingReplication", "Active"),
        ("BufferRemoval", "Stopped"),
        ("OutputReplication", "Stopped"),
    ]


def test_the_plan_as_a_tree() -> None:
    result = runner.invoke(
        app, ["validate", str(EXAMPLES / "mc-simulation.cwl"), "--allow-unknown-plugins", "--plan"]
    )
    assert result.exit_code == 0
    assert "MCSimulationRemoval Data initial_state=Stopped" in result.output
    assert "feeder Edge ← MCSimulation/sim-files" in result.output
