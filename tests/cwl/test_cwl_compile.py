"""Compilation of the shared examples into plans, and the forms a `run` may take."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from cwl_support import (
    EXAMPLE_NAMES,
    EXAMPLES,
    EXPERIMENT_PLUGINS,
    catalogue,
    counting_mint,
    example,
    fixture,
    list_form_bundle,
    nested_bundle,
)

from dxts.core.config import DefinitionConfig
from dxts.core.ids import content_hash, id_to_str
from dxts.cwl.check import check_document
from dxts.cwl.compile import EDGE_ARGUMENT, Plan, PlannedMember, compile_plan
from dxts.cwl.loading import Bundle, load_document
from dxts.cwl.problems import Kind
from dxts.cwl.validation import validate

DEFAULT_LISTS = [
    ("Archiving", 1, "CleanIntermediates"),
    ("Archiving", 2, "CleanDatabaseEntries"),
    ("Cancelling", 1, "CancelInFlightParcels"),
    ("Cancelling", 2, "RemoveOutputFiles"),
    ("Cancelling", 3, "RemoveIntermediateFiles"),
    ("Cancelling", 4, "CleanDatabaseEntries"),
]


def compiled(bundle: Bundle, **kwargs: object) -> Plan:
    document, problems = load_document(bundle)
    validated = validate(
        document,
        problems,
        catalogue=catalogue(),
        config=DefinitionConfig(),
        vo="lhcb",
        allow_unknown_plugins=True,
    )
    assert validated.ok, [p.line() for p in validated.problems]
    assert {p.message.split("'")[1] for p in validated.problems} <= EXPERIMENT_PLUGINS
    assert validated.document is not None and validated.analysis is not None
    return compile_plan(
        validated.document,
        validated.analysis,
        config=DefinitionConfig(),
        vo="lhcb",
        sub="alice",
        **kwargs,  # type: ignore[arg-type]
    )


def edge_of(plan: Plan, member: PlannedMember) -> tuple[str, str]:
    """(producer, output) a member's edge feeder reads, found through its FeederArgs id."""
    assert member.feeder == "Edge"
    wanted = member.feeder_args[EDGE_ARGUMENT]  # type: ignore[index]
    for producer in plan.members:
        for output in producer.outputs:
            if id_to_str(output.output_id) == wanted:
                return producer.name, output.name
    raise AssertionError(f"{member.name} feeds from no declared output")


def actions(member: PlannedMember) -> list[tuple[str, int, str]]:
    return [(a.state, a.position, a.action) for a in member.actions]


def test_simulation() -> None:
    plan = compiled(example("simulation"))
    assert [m.name for m in plan.members] == ["MCSimulation", "MCReconstruction", "MCMerge"]
    sim, reco, merge = plan.members
    assert (sim.feeder, sim.feeder_args["target_events"]) == ("Seeds", 600000)  # type: ignore[index]
    assert edge_of(plan, reco) == ("MCSimulation", "sim-files")
    assert edge_of(plan, merge) == ("MCReconstruction", "reco-files")
    assert [(o.name, o.intermediate) for m in plan.members for o in m.outputs] == [
        ("sim-files", True),
        ("reco-files", True),
        ("merged", False),
    ]
    assert (merge.packer, merge.packer_args) == (
        "ByGroupSizeRun",
        {"group_size": 4, "keep_storage_together": True},
    )
    assert actions(merge) == [("Finalizing", 1, "NoInputProcessedTwice"), *DEFAULT_LISTS]
    assert not plan.scouts and plan.approving == ()
    assert {m.initial_state for m in plan.members} == {"Active"}
    assert plan.type == "MCSimulation" and {m.type for m in plan.members} == {"MCSimulation"}
    assert plan.hooks is None
    assert all(
        m.hooks == {"HandleFailedInput": {"hook": "RetryUntilMaxErrors"}} for m in plan.members
    )
    assert len(plan.processes) == 3 and all(m.process_id for m in plan.members)


def test_mc_simulation() -> None:
    plan = compiled(example("mc-simulation"))
    names = [m.name for m in plan.members]
    assert names == [
        "MCSimulation",
        "MCReconstruction",
        "MCMerge",
        "MCSimulationRemoval",
        "MCReconstructionRemoval",
        "OutputReplication",
    ]
    assert [(a.state, a.position, a.action) for a in plan.approving] == [
        ("Approving", 1, "CheckSuccessRate"),
        ("Approving", 2, "EstimateResourceUsage"),
        ("Approving", 3, "PPGApproval"),
        ("Approving", 4, "ManualApproval"),
    ]
    assert plan.approving[0].args == {"min_success_rate": 0.9, "min_passed": 80}
    reco = plan.member("MCReconstruction")
    assert actions(reco)[:3] == [
        ("Finalizing", 1, "NoInputProcessedTwice"),
        ("Finalizing", 2, "MergeHistograms"),
        ("Finalizing", 3, "MergeHistograms"),
    ]
    assert [a.args for a in reco.actions[1:3]] == [{"output": "BOOLEHIST"}, {"output": "MOOREHIST"}]
    removal = plan.member("MCSimulationRemoval")
    assert (removal.kind, removal.process_id, removal.outputs) == ("Data", None, ())
    assert edge_of(plan, removal) == ("MCSimulation", "sim-files")
    assert removal.after == ("MCReconstruction",)
    assert removal.annotations["after"] == [id_to_str(reco.transformation_id)]
    assert removal.annotations["data_management"] == {
        "operation": "remove",
        "files": "MCSimulation/sim-files",
    }
    assert removal.upstream == ("MCSimulation", "MCReconstruction")
    assert edge_of(plan, plan.member("OutputReplication")) == ("MCMerge", "merged")
    # Compute steps scout; data management sitting downstream waits for approval.
    assert plan.scouts
    assert {m.name: (m.initial_state, m.scouts) for m in plan.members} == {
        "MCSimulation": ("Active", True),
        "MCReconstruction": ("Active", True),
        "MCMerge": ("Active", True),
        "MCSimulationRemoval": ("Stopped", False),
        "MCReconstructionRemoval": ("Stopped", False),
        "OutputReplication": ("Stopped", False),
    }


def test_sprucing() -> None:
    plan = compiled(example("sprucing"))
    staging = plan.member("StagingReplication")
    buffer = plan.member("BufferRemoval")
    sprucing = plan.member("sprucing")
    # Data management on a fed input takes the same catalogue feeder as the input.
    assert staging.feeder == buffer.feeder == sprucing.feeder == "LHCbBookkeeping"
    assert staging.feeder_args == buffer.feeder_args == sprucing.feeder_args
    assert sprucing.after == ("StagingReplication",)
    assert buffer.after == ("sprucing",)
    assert edge_of(plan, plan.member("merge")) == ("sprucing", "spruced")
    assert edge_of(plan, plan.member("OutputReplication")) == ("merge", "merged")
    # sprucing waits on the staging, so the staging is an ancestor of a compute step: it scouts.
    assert {m.name: (m.initial_state, m.scouts) for m in plan.members} == {
        "sprucing": ("Active", True),
        "merge": ("Active", True),
        "StagingReplication": ("Active", True),
        "BufferRemoval": ("Stopped", False),
        "OutputReplication": ("Stopped", False),
    }
    assert [a.action for a in plan.approving] == [
        "CheckSuccessRate",
        "EstimateResourceUsage",
        "ManualApproval",
    ]


def test_analysis_production() -> None:
    plan = compiled(example("analysis-production"))
    first, second = plan.members
    assert first.feeder == "LHCbBookkeeping"  # output-prefix is a parameter, not a pool
    assert first.feeder_args["event_type"] == "94000000"  # type: ignore[index]
    assert edge_of(plan, second) == ("transformation_1", "LB2DDSTP_ROOT")
    assert [o.intermediate for o in first.outputs + second.outputs] == [True, False]
    assert first.annotations == {
        "id": "transformation_1",
        "label": "WGProduction",
        "doc": "DaVinci tupling over the bookkeeping dataset",
        "initial_state": "Active",
        "driving_input": "input-data",
    }
    assert plan.annotations["id"] == "AnaProd_lb2ddstp_2026_data_lb2ddstp_26_MagUp_Sp26c2a"
    assert not plan.scouts


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_list_form_compiles_to_the_same_plan(name: str) -> None:
    maps = compiled(example(name), mint=counting_mint())
    lists = compiled(list_form_bundle(name), mint=counting_mint())
    assert lists.stripped_spec != maps.stripped_spec  # the record keeps the form written
    assert isinstance(lists.stripped_spec["steps"], list)
    same = dataclasses.replace(lists, stripped_spec=maps.stripped_spec)
    assert same == maps


def test_stripped_spec_carries_hashes_not_bodies() -> None:
    plan = compiled(example("mc-simulation"))
    runs = {name: step["run"] for name, step in plan.stripped_spec["steps"].items()}
    assert runs == {
        m.name: f"proc:sha256-{m.process_id.hex()}" for m in plan.members if m.process_id
    }  # type: ignore[union-attr]


def test_inline_nested_and_packed_runs_are_stored_as_references() -> None:
    plan = compiled(nested_bundle())
    by_location = {p.location: p for p in plan.processes}
    gauss, merge = by_location["tools/gauss.cwl"], by_location["wf/packed.cwl#merge"]
    chain = plan.member("chain")
    inline = next(p for p in plan.processes if p.process_id == chain.process_id)
    # The inline sub-workflow is a process of its own that references its children by hash.
    assert set(inline.children) == {gauss.process_id, merge.process_id}
    steps = inline.body["steps"]
    assert steps["gauss"]["run"] == f"proc:sha256-{gauss.process_id.hex()}"
    assert steps["merge"]["run"] == f"proc:sha256-{merge.process_id.hex()}"
    assert inline.body["cwlVersion"] == "v1.2" and "$namespaces" not in inline.body
    assert merge.body["cwlVersion"] == "v1.2" and merge.body["id"] == "merge"
    # Children come first, one body per hash: gauss runs twice but is stored once.
    assert [p.process_id for p in plan.processes].index(gauss.process_id) < [
        p.process_id for p in plan.processes
    ].index(inline.process_id)
    assert plan.member("again").process_id == gauss.process_id
    assert len(plan.processes) == 3
    assert set(plan.references) == {
        (inline.process_id, gauss.process_id),
        (inline.process_id, merge.process_id),
    }
    assert all(content_hash(p.body) == p.process_id for p in plan.processes)


def test_a_process_reference_is_kept_and_checked_only_at_submission_offline() -> None:
    gauss_hash = compiled(example("simulation")).member("MCSimulation").process_id
    assert gauss_hash is not None
    text = (
        (example("simulation").read("simulation.cwl") or "")
        .replace("transformations/gauss.cwl", f"proc:sha256-{gauss_hash.hex()}")
        .replace("transformations/merge.cwl", "proc:lhcb-merge@v3")
    )
    problems, plan = check_document(
        Bundle.from_mapping(
            "s.cwl",
            {
                "s.cwl": text,
                "transformations/boole-moore.cwl": example("simulation").read(
                    "transformations/boole-moore.cwl"
                )
                or "",
            },
        ),
        catalogue=catalogue(),
        allow_unknown_plugins=True,
    )
    assert {(p.kind, p.path) for p in problems} == {
        (Kind.UNRESOLVED_RUN, "steps.MCSimulation.run"),
        (Kind.UNRESOLVED_RUN, "steps.MCMerge.run"),
        (Kind.ENDLESS_FEEDER, "inputs.events.dirac:Feeder"),  # nothing stops its Seeds
    }
    assert plan is not None
    assert plan.member("MCSimulation").process_id == gauss_hash
    assert plan.member("MCMerge").process_id is None  # a registry name needs the server


def packed_bundle(main: str) -> Bundle:
    gauss = yaml.safe_load(example("simulation").read("transformations/gauss.cwl") or "")
    gauss.pop("cwlVersion")
    workflow = {
        "id": "main",
        "class": "Workflow",
        "hints": {"dirac:Workgraph": {"schema_version": "1.0", "type": "Test"}},
        "inputs": {
            "events": {
                "type": {"type": "array", "items": ["File", "string"]},
                "dirac:Feeder": {
                    "name": "Seeds",
                    "args": {"target_events": 5, "events_per_seed": 1},
                },
            }
        },
        "steps": {
            "sim": {
                "hints": {"dirac:Transformation": {}},
                "run": "#gauss",
                "in": {"seed": "events"},
                "out": ["sim-files"],
            }
        },
        "outputs": {"files": {"type": "File[]", "outputSource": "sim/sim-files"}},
    }
    packed = {
        "cwlVersion": "v1.2",
        "$namespaces": {"dirac": "https://diracgrid.org/cwl#"},
        "$graph": [workflow, {"id": "gauss", **gauss}],
    }
    return Bundle.from_mapping(main, {"packed.cwl": json.dumps(packed)})


@pytest.mark.parametrize("main", ["packed.cwl", "packed.cwl#main"])
def test_a_packed_document_is_entered_at_main_or_its_fragment(main: str) -> None:
    plan = compiled(packed_bundle(main))
    (process,) = plan.processes
    assert process.location == "packed.cwl#gauss"
    assert process.body["id"] == "gauss" and process.body["cwlVersion"] == "v1.2"
    assert "$namespaces" not in process.body  # the tool uses no dirac: prefix
    assert plan.member("sim").process_id == process.process_id
    assert plan.stripped_spec["id"] == "main" and "$namespaces" in plan.stripped_spec


def test_a_symlink_out_of_a_directory_bundle_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.cwl"
    secret.write_text(example("simulation").read("transformations/gauss.cwl") or "")
    bundle_dir = tmp_path / "bundle"
    (bundle_dir / "transformations").mkdir(parents=True)
    for name in ("simulation.cwl", "transformations/boole-moore.cwl", "transformations/merge.cwl"):
        (bundle_dir / name).write_text((EXAMPLES / name).read_text())
    (bundle_dir / "transformations" / "gauss.cwl").symlink_to(secret)
    problems, plan = check_document(
        Bundle.from_directory(bundle_dir, "simulation.cwl"),
        catalogue=catalogue(),
        allow_unknown_plugins=True,
    )
    assert plan is None
    assert [(p.kind, p.path) for p in problems if p.kind is Kind.UNRESOLVED_RUN] == [
        (Kind.UNRESOLVED_RUN, "steps.MCSimulation.run")
    ]


def test_a_joined_step_input_records_the_output_it_joins() -> None:
    """ByPartner names its partner by step input: the compiler records which output each of the
    step's other inputs sourced from a step joins (the driving input and constants aside)."""
    plan = compiled(fixture("partner-join.cwl"))
    compare = plan.member("compare")
    assert edge_of(plan, compare) == ("reco-a", "reco-files")
    reco_b = plan.member("reco-b").outputs[0]
    assert compare.annotations["joined"] == {"b": id_to_str(reco_b.output_id)}
    assert "joined" not in plan.member("reco-a").annotations
