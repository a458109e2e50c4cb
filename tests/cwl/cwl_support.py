"""Shared helpers of the CWL tests (the definition tests submit the same fixtures): fixture
bundles and a plugin catalogue.

`catalogue()` is a real plugin Registry holding stand-ins for dxts's built-in plugins, with
small argument models (and a phase rule on Seeds), until the built-ins are registered. The
experiment-specific names of the shared examples (LHCb's) are deliberately absent: the tests
submit those documents with `allow_unknown_plugins` and assert exactly which were unknown.
TODO: use the entry-point registry and tests/extension's plugins once they exist.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from dxts.core.plugins import Phase, PluginArgs, action, hook
from dxts.core.plugins.registry import Registry
from dxts.cwl.loading import Bundle

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = FIXTURES / "examples"
EXAMPLE_NAMES = ("simulation", "mc-simulation", "sprucing", "analysis-production")
EXPERIMENT_PLUGINS = {
    "LHCbBookkeeping",
    "MergeHistograms",
    "PPGApproval",
    "OnlyUnprocessedRemain",
    "RemovedFilesHaveNoReplica",
    "EveryInputSettled",
}


class SeedsArgs(PluginArgs):
    target_events: int = Field(ge=1)
    events_per_seed: int = Field(ge=1)
    scouting_events: int | None = Field(None, ge=1)
    batch: int | None = None
    max_in_flight: int | None = None

    def check_phase(self, phase: Phase) -> None:
        if phase is Phase.SCOUTING and self.scouting_events is None:
            raise ValueError("a scouting Seeds feeder needs scouting_events (the scout's sample)")


class GroupArgs(PluginArgs):
    group_size: int = Field(ge=1)
    keep_storage_together: bool = False


class CheckSuccessRateArgs(PluginArgs):
    min_success_rate: float = Field(ge=0, le=1)
    min_passed: int | None = None


class EstimateArgs(PluginArgs):
    max_cpu_hours: float | None = None
    max_memory_gb: float | None = None


class RoleArgs(PluginArgs):
    role: str


class RetryArgs(PluginArgs):
    max_errors: int | None = None


def seeds(*, feeder_args: SeedsArgs, feeder_state: dict[str, Any]) -> None:
    """Stands in for the built-in seed feeder (only its arguments matter here)."""


def grouping(*, packer_args: GroupArgs, inputs: Any) -> None:
    """Stands in for the built-in grouping packers."""


def per_input(*, inputs: Any) -> None:
    """Stands in for PerInput, which takes no arguments."""


@hook("HandleFailedInput")
def retry(*, args: RetryArgs, input: Any) -> None:
    """Stands in for RetryUntilMaxErrors."""


@action("Approving")
def check_success_rate(*, args: CheckSuccessRateArgs) -> None:
    """Stands in for CheckSuccessRate."""


@action("Approving")
def estimate(*, args: EstimateArgs) -> None:
    """Stands in for EstimateResourceUsage."""


@action("Approving")
def manual(*, args: RoleArgs) -> None:
    """Stands in for ManualApproval."""


@action("Finalizing")
def finalizing(*, transformation: Any) -> None:
    """Stands in for the built-in finalizing checks."""


@action("Archiving", "Cleaning")
def housekeeping(*, transformation: Any) -> None:
    """Stands in for the built-in archiving and cleaning actions."""


def catalogue() -> Registry:
    return Registry.of(
        {
            "feeder": {"Seeds": seeds},
            "packer": {
                "PerInput": per_input,
                "BySize": grouping,
                "ByRun": grouping,
                "ByGroupSizeRun": grouping,
            },
            "hook": {"RetryUntilMaxErrors": retry},
            "action": {
                "CheckSuccessRate": check_success_rate,
                "EstimateResourceUsage": estimate,
                "ManualApproval": manual,
                "NoInputProcessedTwice": finalizing,
                **{
                    name: housekeeping
                    for name in (
                        "CleanIntermediates",
                        "CleanDatabaseEntries",
                        "CancelInFlightParcels",
                        "RemoveOutputFiles",
                        "RemoveIntermediateFiles",
                    )
                },
            },
        }
    )


def example(name: str) -> Bundle:
    return Bundle.from_directory(EXAMPLES, f"{name}.cwl")


def fixture(relative: str) -> Bundle:
    return Bundle.from_directory(FIXTURES, relative)


def counting_mint() -> Any:
    """Deterministic ids, so two compilations of one document can be compared whole."""
    counter = iter(range(1, 1_000_000))

    def mint(count: int) -> list[bytes]:
        return [next(counter).to_bytes(16, "big") for _ in range(count)]

    return mint


def _as_list(value: Any, key: str) -> Any:
    if not isinstance(value, dict):
        return value
    out = []
    for name, entry in value.items():
        if isinstance(entry, dict):
            out.append({key: name, **entry})
        else:  # the short forms: `in: {x: source}`, `inputs: {x: type}`
            short = {"in": "source", "hints": None}.get(key, "type")
            out.append({key: name, short or "value": entry})
    return out


def list_form(document: dict[str, Any]) -> dict[str, Any]:
    """The same workflow with every map-form field CWL allows written as a list."""
    out = dict(document)
    for field in ("inputs", "outputs"):
        out[field] = _as_list(document.get(field), "id")
    if isinstance(document.get("hints"), dict):
        out["hints"] = [{"class": c, **body} for c, body in document["hints"].items()]
    steps = []
    for name, step in (document.get("steps") or {}).items():
        step = dict(step)
        if isinstance(step.get("in"), dict):
            step["in"] = [
                {"id": k, **v} if isinstance(v, dict) else {"id": k, "source": v}
                for k, v in step["in"].items()
            ]
        if isinstance(step.get("hints"), dict):
            step["hints"] = [{"class": c, **body} for c, body in step["hints"].items()]
        steps.append({"id": name, **step})
    out["steps"] = steps
    return out


def list_form_bundle(name: str) -> Bundle:
    """An example rewritten in list form, beside the same tool files."""
    document = yaml.safe_load((EXAMPLES / f"{name}.cwl").read_text())
    files = {
        f"transformations/{p.name}": p.read_text() for p in (EXAMPLES / "transformations").iterdir()
    }
    files[f"{name}.cwl"] = yaml.safe_dump(list_form(document), sort_keys=False)
    return Bundle.from_mapping(f"{name}.cwl", files)


NESTED = """
cwlVersion: v1.2
class: Workflow
$namespaces: {dirac: https://diracgrid.org/cwl#}
requirements: {SubworkflowFeatureRequirement: {}}
hints:
  dirac:Workgraph: {schema_version: "1.0", type: Test}
inputs:
  events:
    type: {type: array, items: [File, string]}
    dirac:Feeder: {name: Seeds, args: {target_events: 10, events_per_seed: 1}}
steps:
  chain:
    hints: {dirac:Transformation: {}}
    in: {seed: events}
    out: [merged]
    run:
      class: Workflow
      inputs:
        seed: {type: {type: array, items: [File, string]}}
      outputs:
        merged: {type: "File[]", outputSource: merge/merged}
      steps:
        gauss:
          run: ../tools/gauss.cwl
          in: {seed: seed}
          out: [sim-files]
        merge:
          run: packed.cwl#merge
          in: {input-data: gauss/sim-files}
          out: [merged]
  again:
    hints: {dirac:Transformation: {}}
    run: ../tools/gauss.cwl
    in: {seed: chain/merged}
    out: [sim-files]
outputs:
  final: {type: "File[]", outputSource: again/sim-files}
"""


def nested_bundle() -> Bundle:
    tools = example("simulation")
    packed = {
        "cwlVersion": "v1.2",
        "$graph": [
            {
                "id": "merge",
                "class": "CommandLineTool",
                "baseCommand": ["true"],
                "inputs": {"input-data": {"type": {"type": "array", "items": ["File", "string"]}}},
                "outputs": {"merged": {"type": "File[]", "outputBinding": {"glob": "*.m"}}},
            }
        ],
    }
    return Bundle.from_mapping(
        "wf/nested.cwl",
        {
            "wf/nested.cwl": NESTED,
            "wf/packed.cwl": json.dumps(packed),
            "tools/gauss.cwl": tools.read("transformations/gauss.cwl") or "",
        },
    )
