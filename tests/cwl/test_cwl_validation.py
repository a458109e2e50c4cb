"""Every validation rule of docs/cwl.md on a fixture document, each asserting kind and path."""

from __future__ import annotations

import pytest
from cwl_support import (
    EXAMPLE_NAMES,
    EXPERIMENT_PLUGINS,
    FIXTURES,
    catalogue,
    example,
    fixture,
)

from dxts.core.config import DefinitionConfig
from dxts.core.errors import InvalidArgument
from dxts.cwl.check import validate_bundle
from dxts.cwl.loading import Bundle, load_document
from dxts.cwl.problems import DocumentViolation, Kind, Severity, raise_for_errors
from dxts.cwl.validation import Validated, validate


def check(bundle: Bundle, *, allow_unknown_plugins: bool = False) -> Validated:
    document, problems = load_document(bundle)
    return validate(
        document,
        problems,
        catalogue=catalogue(),
        config=DefinitionConfig(),
        allow_unknown_plugins=allow_unknown_plugins,
    )


def found(validated: Validated, severity: Severity = Severity.ERROR) -> set[tuple[str, str]]:
    return {(p.kind.value, p.path) for p in validated.problems if p.severity is severity}


def test_the_base_fixture_is_valid() -> None:
    validated = check(fixture("valid.cwl"))
    assert validated.problems == []
    assert validated.ok


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_the_shared_examples_are_valid_with_only_experiment_plugins_unknown(name: str) -> None:
    validated = check(example(name), allow_unknown_plugins=True)
    assert validated.ok
    unknown = {p.message.split("'")[1] for p in validated.problems}
    assert {p.kind for p in validated.problems} <= {Kind.UNKNOWN_PLUGIN}
    assert unknown <= EXPERIMENT_PLUGINS


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("not-a-workgraph-tool.cwl", {("not-a-workgraph", "class")}),
        ("not-a-workgraph-no-hint.cwl", {("not-a-workgraph", "hints")}),
        ("bare-step.cwl", {("bare-step", "steps.merge.hints")}),
        (
            "hint-schema.cwl",
            {
                ("hint-schema", "hints.dirac:Workgraph.schema_version"),
                ("hint-schema", "inputs.events.dirac:Feeder.arguments"),  # no such field
                ("hint-schema", "steps.merge.hints.dirac:Transformation.packr"),
                ("hint-schema", "steps.merge.hints.dirac:Transformation.initial_state"),
            },
        ),
        (
            "unknown-source.cwl",
            {
                ("unknown-source", "steps.merge.in.input-data"),
                ("unknown-source", "outputs.datasets.outputSource"),
                ("unknown-source", "hints.dirac:Workgraph.data_management[0].files"),
                ("unknown-source", "hints.dirac:Workgraph.data_management[0].after[0]"),
                ("unknown-source", "hints.dirac:Workgraph.target.output"),
                # with its only consumer misspelt, sim's output is consumed by nothing
                ("orphan-output", "steps.sim.out.sim-files"),
                # and merge has no pool left, and its output (outputSource misspelt) no reader
                ("no-driving-input", "steps.merge.in"),
                ("orphan-output", "steps.merge.out.merged"),
            },
        ),
        (
            "step-name-slash.cwl",
            {
                ("invalid-name", "steps.s/im"),
                # left out, so its consumer's source names nothing and nothing drives it
                ("unknown-source", "steps.merge.in.input-data"),
                ("no-driving-input", "steps.merge.in"),
            },
        ),
        ("orphan-output.cwl", {("orphan-output", "steps.sim.out.log-files")}),
        ("cycle.cwl", {("cycle", "steps.sim")}),
        (
            "no-driving-input.cwl",
            {("no-driving-input", "steps.sim.in")},
        ),
        ("ambiguous-driving-input.cwl", {("ambiguous-driving-input", "steps.compare.in")}),
        (
            "driving-input.cwl",
            {("driving-input", "steps.compare.hints.dirac:Transformation.driving_input")},
        ),
        (
            "unknown-plugin.cwl",
            {
                ("unknown-plugin", "steps.merge.hints.dirac:Transformation.packer.name"),
                (
                    "unknown-plugin",
                    "steps.merge.hints.dirac:Transformation.actions.Finalizing[0].action",
                ),
            },
        ),
        (
            "plugin-args.cwl",
            {
                ("plugin-args", "steps.merge.hints.dirac:Transformation.packer.args.group_size"),
                # the phase rule: the workgraph scouts (an approving list, compute steps) and
                # Seeds without scouting_events is contradictory while scouting
                ("plugin-args", "inputs.events.dirac:Feeder.args"),
            },
        ),
    ],
)
def test_each_rule_reports_its_kind_and_path(document: str, expected: set[tuple[str, str]]) -> None:
    validated = check(fixture(f"invalid/{document}"))
    assert found(validated) == expected
    assert not validated.ok
    assert all(len(p.message) > 30 for p in validated.problems)


def test_an_unknown_hint_field_is_reported_at_that_field_with_the_closest_name() -> None:
    messages = {p.path: p.message for p in check(fixture("invalid/hint-schema.cwl")).problems}
    packr = messages["steps.merge.hints.dirac:Transformation.packr"]
    assert "'packr' is not a field here; did you mean 'packer'?" in packr
    assert "did you mean 'args'?" in messages["inputs.events.dirac:Feeder.arguments"]


def test_an_unknown_hint_field_with_nothing_close_lists_the_fields() -> None:
    text = (fixture("valid.cwl").read("valid.cwl") or "").replace(
        "type: Test", "type: Test, zzzz: 1"
    )
    validated = check(Bundle.from_mapping("valid.cwl", {**_tools(), "valid.cwl": text}))
    (problem,) = validated.problems
    assert (problem.kind, problem.path) == (Kind.HINT_SCHEMA, "hints.dirac:Workgraph.zzzz")
    assert "did you mean" not in problem.message
    assert "approving, data_management, hooks" in problem.message


def _tools() -> dict[str, str]:
    folder = FIXTURES / "examples" / "transformations"
    return {
        f"examples/transformations/{path.name}": path.read_text() for path in folder.glob("*.cwl")
    }


def test_a_tool_carrying_workflow_fields_is_not_a_workgraph_before_any_schema_error() -> None:
    validated = validate_bundle(
        fixture("invalid/not-a-workgraph-tool-steps.cwl"),
        catalogue(),
        DefinitionConfig(),
        "",
        allow_unknown_plugins=False,
    )
    first, *rest = validated.problems
    assert (first.kind, first.path) == (Kind.NOT_A_WORKGRAPH, "class")
    assert "CommandLineTool carrying the workflow field(s) steps" in first.message
    assert [p.kind for p in rest] == [Kind.INVALID_CWL]  # CWL's own complaint comes after


def test_an_inline_expression_tool_is_warned_about_even_when_cwl_refuses_the_document() -> None:
    validated = validate_bundle(
        fixture("invalid/expression-tool-strict.cwl"),
        catalogue(),
        DefinitionConfig(),
        "",
        allow_unknown_plugins=False,
    )
    assert found(validated, Severity.WARNING) == {("expression-tool", "steps.pick.run")}
    assert [p.kind for p in validated.problems if p.severity is Severity.ERROR] == [
        Kind.INVALID_CWL
    ]
    assert not validated.ok


def test_the_cycle_names_its_members() -> None:
    (problem,) = check(fixture("invalid/cycle.cwl")).problems
    assert "sim, merge" in problem.message


def test_the_phase_rule_is_said_to_be_about_scouting() -> None:
    validated = check(fixture("invalid/plugin-args.cwl"))
    feeder = next(p for p in validated.problems if p.path.startswith("inputs.events"))
    assert "while scouting" in feeder.message and "scouting_events" in feeder.message


def test_offline_mode_turns_unknown_plugins_into_warnings() -> None:
    validated = check(fixture("invalid/unknown-plugin.cwl"), allow_unknown_plugins=True)
    assert validated.ok
    assert found(validated, Severity.WARNING) == {
        ("unknown-plugin", "steps.merge.hints.dirac:Transformation.packer.name"),
        ("unknown-plugin", "steps.merge.hints.dirac:Transformation.actions.Finalizing[0].action"),
    }


def test_expression_tools_scatter_and_when_are_warnings_saying_what_happens() -> None:
    validated = check(fixture("invalid/warnings.cwl"))
    assert validated.ok
    assert found(validated, Severity.WARNING) == {
        ("scatter", "steps.sim.scatter"),
        ("expression-tool", "steps.pick.run"),
        ("when", "steps.pick.when"),
    }
    assert all("dxts" in p.message for p in validated.problems)


def test_a_document_with_several_problems_reports_all_of_them() -> None:
    validated = check(fixture("invalid/several.cwl"))
    assert found(validated) == {
        ("bare-step", "steps.sim.hints"),
        ("unknown-source", "steps.merge.in.input-data"),
        ("orphan-output", "steps.sim.out.sim-files"),
        ("no-driving-input", "steps.merge.in"),
        ("unknown-plugin", "steps.merge.hints.dirac:Transformation.packer.name"),
    }
    with pytest.raises(InvalidArgument) as raised:
        raise_for_errors(validated.problems)
    violations = raised.value.violations
    assert len(violations) == 5
    assert all(isinstance(v, DocumentViolation) for v in violations)
    assert {(v.kind, v.field) for v in violations if isinstance(v, DocumentViolation)} == found(
        validated
    )
    assert all(v.description.startswith(f"{v.kind}: ") for v in violations)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ("../../outside.cwl", "climbs out of the bundle"),
        ("/etc/passwd", "not a path inside the bundle"),
        ("https://example.org/tool.cwl", "not a path inside the bundle"),
        ("missing.cwl", "not in the submitted bundle"),
        ("proc:sha256-xyz", "not a process reference"),
    ],
)
def test_a_run_outside_the_bundle_is_refused_not_fetched(run: str, message: str) -> None:
    text = (fixture("valid.cwl").read("valid.cwl") or "").replace(
        "examples/transformations/merge.cwl", run
    )
    validated = check(Bundle.from_mapping("wf/main.cwl", {"wf/main.cwl": text}))
    problems = [p for p in validated.problems if p.path == "steps.merge.run"]
    assert [p.kind for p in problems] == [Kind.UNRESOLVED_RUN]
    assert message in problems[0].message


def test_invalid_cwl_is_reported_with_the_file() -> None:
    validated = check(
        Bundle.from_mapping("w.cwl", {"w.cwl": "cwlVersion: v1.2\nclass: Workflow\nsteps: 3\n"})
    )
    assert [p.kind for p in validated.problems] == [Kind.INVALID_CWL]
    assert validated.problems[0].message.startswith("w.cwl: ")
    assert (
        check(Bundle.from_mapping("w.cwl", {"w.cwl": "cwlVersion: v1.0\nclass: Workflow\n"}))
        .problems[0]
        .path
        == "cwlVersion"
    )
