"""`dxts validate`: the same validation and compilation, no server, exit codes and lines."""

from __future__ import annotations

import json

from cwl_support import EXAMPLES, FIXTURES
from typer.testing import CliRunner

from dxts.cli.main import app

runner = CliRunner()


def lines(output: str) -> list[list[str]]:
    return [line.split("  ", 3) for line in output.splitlines() if line]


def test_a_valid_document_exits_0_with_its_warnings() -> None:
    result = runner.invoke(
        app, ["validate", str(EXAMPLES / "simulation.cwl"), "--allow-unknown-plugins"]
    )
    assert result.exit_code == 0, result.output
    # Whatever is not installed here is a warning, each on a line of its own.
    assert {(s, k) for s, k, _, _ in lines(result.output)} <= {("warning", "unknown-plugin")}


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
