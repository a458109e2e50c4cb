"""`dxts validate`: the same validation and compilation, no server, exit codes and lines."""

from __future__ import annotations

import json

from definition_support import EXAMPLES, FIXTURES
from typer.testing import CliRunner

from dxts.cli.main import app

runner = CliRunner()


def lines(output: str) -> list[list[str]]:
    return [line.split("  ", 3) for line in output.splitlines() if line]


def test_a_valid_document_offline_exits_0_with_its_warnings() -> None:
    result = runner.invoke(
        app, ["validate", str(EXAMPLES / "simulation.cwl"), "--allow-unknown-plugins"]
    )
    assert result.exit_code == 0, result.output
    found = lines(result.output)
    # Nothing is installed offline, so every plugin the document names is a warning.
    assert {(s, k) for s, k, _, _ in found} == {("warning", "unknown-plugin")}
    assert [p for _, _, p, _ in found][:2] == [
        "steps.MCSimulation.hints.dirac:Transformation.packer.name",
        "steps.MCSimulation.hints.dirac:Transformation.actions.Finalizing[0].action",
    ]


def test_unknown_plugins_are_errors_without_the_flag() -> None:
    result = runner.invoke(app, ["validate", str(EXAMPLES / "simulation.cwl")])
    assert result.exit_code == 1
    assert {tuple(line[:2]) for line in lines(result.output)} == {("error", "unknown-plugin")}


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
    assert found == {
        ("error", "bare-step", "steps.sim.hints"),
        ("error", "unknown-source", "steps.merge.in.input-data"),
        ("error", "orphan-output", "steps.sim.out.sim-files"),
        ("error", "no-driving-input", "steps.merge.in"),
        ("warning", "unknown-plugin", "steps.merge.hints.dirac:Transformation.packer.name"),
        ("warning", "unknown-plugin", "inputs.events.dirac:Feeder.name"),
    }


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
