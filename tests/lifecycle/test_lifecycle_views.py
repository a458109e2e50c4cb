"""What the engine derives from rows: the document's target, the members' dependencies, the
members whose list may run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dxts.definition.logic.lifecycle.sweep import ready
from dxts.definition.logic.lifecycle.views import document_target

EXAMPLE = Path(__file__).parents[1] / "cwl" / "fixtures" / "examples" / "mc-simulation.cwl"
MEMBERS: dict[str, Any] = {"MCSimulation": None, "MCReconstruction": None, "MCMerge": None}
RESOLVED = {"output": "datasets", "files": 200, "step": "MCMerge", "step_output": "merged"}


def test_the_target_of_a_document_in_map_form() -> None:
    spec = yaml.safe_load(EXAMPLE.read_text())
    assert document_target(spec, MEMBERS) == RESOLVED


def test_the_target_of_a_document_in_list_form_and_a_packed_one() -> None:
    listed = {
        "class": "Workflow",
        "$namespaces": {"d": "https://diracgrid.org/cwl#"},
        "hints": [{"class": "d:Workgraph", "target": {"output": "datasets", "files": 200}}],
        "outputs": [{"id": "datasets", "outputSource": ["MCMerge/merged"]}],
    }
    assert document_target(listed, MEMBERS) == RESOLVED
    packed = {
        "$namespaces": {"dirac": "https://diracgrid.org/cwl#"},
        "$graph": [
            {"id": "#gauss", "class": "CommandLineTool"},
            {
                "id": "#main",
                "class": "Workflow",
                "hints": {"dirac:Workgraph": {"target": {"output": "datasets", "files": 200}}},
                "outputs": [{"id": "#main/datasets", "outputSource": "#main/MCMerge/merged"}],
            },
        ],
    }
    assert document_target(packed, MEMBERS) == RESOLVED


def test_no_target_when_the_document_has_none_or_it_cannot_be_resolved() -> None:
    spec = yaml.safe_load(EXAMPLE.read_text())
    assert document_target(spec, {"MCSimulation": None}) is None  # no member produces it
    del spec["hints"]["dirac:Workgraph"]["target"]
    assert document_target(spec, MEMBERS) is None
    other = {"hints": {"other:Workgraph": {"target": {"output": "datasets"}}}}
    assert document_target(other, MEMBERS) is None
    assert document_target(None, MEMBERS) is None


def test_members_whose_list_may_run() -> None:
    a, b, c, d = b"a", b"b", b"c", b"d"
    depends = {a: set(), b: {a}, c: set(), d: {b}}
    statuses = {a: "FinalizingBlocked", b: "Finalizing", c: "Finalizing", d: "Finalizing"}
    assert ready(statuses, depends, "Finalizing", "Finalized") == [c]
    statuses[a] = "Finalized"
    assert ready(statuses, depends, "Finalizing", "Finalized") == [b, c]
    statuses.update({b: "Finalized", c: "Finalized"})
    assert ready(statuses, depends, "Finalizing", "Finalized") == [d]
