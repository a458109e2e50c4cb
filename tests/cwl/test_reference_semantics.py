"""Behaviours of the design that were untested: a hint class written as its full URI, a step's
second output feeding its own consumer, and output-sandbox patterns that never become outputs
or edges."""

from __future__ import annotations

from pathlib import Path

import yaml

from dxts.core.config import DefinitionConfig
from dxts.core.ids import id_to_str
from dxts.core.plugins.registry import Registry
from dxts.cwl.check import check_document
from dxts.cwl.compile import EDGE_ARGUMENT, Plan
from dxts.cwl.loading import Bundle

REFERENCE = Path(__file__).resolve().parents[2] / "examples" / "reference"
DIRAC = "https://diracgrid.org/cwl#"


def plan_of(text: str, main: str = "main.cwl") -> Plan:
    files = {main: text}
    for tool in (REFERENCE / "tools").glob("*.cwl"):
        files[f"tools/{tool.name}"] = tool.read_text()
    problems, plan = check_document(
        Bundle.from_mapping(main, files), catalogue=Registry.discover(), config=DefinitionConfig()
    )
    assert plan is not None, [p.line() for p in problems]
    return plan


def test_a_hint_class_written_as_its_full_uri_is_the_same_hint() -> None:
    prefixed = (REFERENCE / "partner-comparison.cwl").read_text()
    written = prefixed
    for cls in ("Workgraph", "Transformation", "Feeder"):
        written = written.replace(f"dirac:{cls}:", f"{DIRAC}{cls}:")
    assert DIRAC + "Transformation:" in written and "dirac:Transformation:" not in written

    def compiled(text: str) -> dict[str, object]:
        plan = plan_of(text)
        return {m.name: (m.feeder, m.packer, m.packer_args, m.actions) for m in plan.members}

    assert compiled(written) == compiled(prefixed)


def _document(extra: dict[str, object] | None = None) -> str:
    """A simulation whose second output (its histograms) feeds a merge of its own."""
    document = yaml.safe_load((REFERENCE / "simulation-staged.cwl").read_text())
    document["steps"]["HistogramMerge"] = {
        "hints": {
            "dirac:Transformation": {"packer": {"name": "BySize", "args": {"group_size": 4}}}
        },
        "run": "tools/process.cwl",
        "in": {"input-data": "Simulation/histograms"},
        "out": ["reco-files", "status-report"],
    }
    document["outputs"]["merged-histograms"] = {
        "type": "File[]",
        "outputSource": "HistogramMerge/reco-files",
    }
    document["hints"]["dirac:Workgraph"].update(extra or {})
    return yaml.safe_dump(document, sort_keys=False)


def test_a_steps_second_output_feeds_its_own_consumer() -> None:
    plan = plan_of(_document())
    simulation, merge = plan.member("Simulation"), plan.member("HistogramMerge")
    histograms = next(o for o in simulation.outputs if o.name == "histograms")
    assert merge.feeder == "Edge"
    assert merge.feeder_args[EDGE_ARGUMENT] == id_to_str(histograms.output_id)  # type: ignore[index]
    # The first output still feeds the reconstruction, each consumer its own edge.
    reconstruction = plan.member("Reconstruction")
    sim_files = next(o for o in simulation.outputs if o.name == "sim-files")
    assert reconstruction.feeder_args == {EDGE_ARGUMENT: id_to_str(sim_files.output_id)}


def test_output_sandbox_patterns_never_become_outputs_or_edges() -> None:
    sandboxed = plan_of(_document({"output_sandbox": ["*.log", "hist-*.json", "*.sim"]}))
    plain = plan_of(_document())
    for name in ("Simulation", "Reconstruction", "HistogramMerge"):
        assert [o.name for o in sandboxed.member(name).outputs] == [
            o.name for o in plain.member(name).outputs
        ]
        assert sandboxed.member(name).feeder == plain.member(name).feeder
    assert len(sandboxed.members) == len(plain.members) == 3
