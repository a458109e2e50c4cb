"""The reference productions' plugins end to end (SQLite and MariaDB). The partner comparison
and the histogram merge run in both shapes (every component in this process, and each its own
process as the chart deploys them: the plugins' providers are each component's own); the others
in the in-process world.

* A partner comparison: four raw files simulated, each reconstructed twice (RecoA, RecoB); the
  Compare step is driven by RecoA's files and joined with RecoB's by ByPartner, the partner named
  by its step input alone, two complete sets to a parcel; its Finalizing EveryPartnerJoined
  passes once every RecoB file was joined. Each parcel carries RecoA's and RecoB's file made
  from the same simulated file.
* A staged scout: ScoutInStages raises the Seeds member's sample through three stages (1, 2 and
  4 events), each settled before the next, then accepts, saying which stage settled; the
  sign-off given, the rest of the events run to Completed.
* A stripping: LHCbAncestors feeds each RDST file with its raw ancestor from the catalogue's
  lineage, AncestorLookup packs two files with their ancestors to a parcel.
* A simulation and its reconstruction, each member's histograms merged at Finalizing in one
  last parcel (MergeHistograms); then forward lineage from a seed, which has no LFN.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from e2e_world import (
    RC,
    Launch,
    T,
    W,
    World,
    check_invariants,
    done_parameters,
    listed,
    output_sources,
    running,
    seeds,
    step,
    tool,
    workgraph,
)

from dxts.backends.null.settings import NullSettings
from dxts.core.catalogue import CatalogueFile
from dxts.core.db import Database
from dxts.core.ids import id_to_str
from dxts.core.schema import execution
from dxts.core.states import ActionResult
from dxts.v1 import execution_pb2

# -- a partner comparison -------------------------------------------------------------------------


def comparison() -> dict[str, Any]:
    compare = {
        "hints": {
            "dirac:Transformation": {
                "driving_input": "files",
                "packer": {"name": "ByPartner", "args": {"group_size": 2, "delay_minutes": 0.01}},
                "actions": {"Finalizing": [{"action": "EveryPartnerJoined"}]},
            }
        },
        "run": tool("partner"),
        "in": {"files": "RecoA/out", "partner": "RecoB/out"},
        "out": ["out", "status-report"],
    }
    return workgraph(
        {"raw": listed(4, "partners")},
        {
            "Sim": step("raw"),
            "RecoA": step("Sim/out"),
            "RecoB": step("Sim/out"),
            "Compare": compare,
        },
        {"compared": "Compare/out"},
    )


def _lfn(file: dict[str, Any]) -> str:
    return str(file["location"]).removeprefix("lfn:")


async def test_two_reconstructions_are_compared_partner_by_partner(launch: Launch) -> None:
    async with launch() as world:
        wg = await world.submit(comparison())
        await world.start(wg)
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        from_a = await output_sources(world, wg, "RecoA/out")
        from_b = await output_sources(world, wg, "RecoB/out")
        parameters = await done_parameters(world, wg, "Compare")
        # Four sets, two to a parcel (the feeder's last files may leave as a smaller group).
        assert sorted(len(p["files"]) for p in parameters) in ([2, 2], [1, 1, 2], [1, 1, 1, 1])
        pairs = [
            (from_a[_lfn(a)], from_b[_lfn(b)])
            for carried in parameters
            for a, b in zip(carried["files"], carried["partner"], strict=True)
        ]
        assert len(pairs) == 4 and all(source_a == source_b for source_a, source_b in pairs)
        joined = (await world.actions(wg))["Compare/Finalizing/1"]
        assert (joined.Result, joined.Message) == (
            ActionResult.PASSED,
            "all 4 partner files (partner) were joined",
        )


# -- a staged scout ------------------------------------------------------------------------------

THRESHOLD = {"min_sample": 2, "min_success_rate": 0.9}


def staged() -> dict[str, Any]:
    return workgraph(
        {"seeds": seeds(8)},  # no scouting_events: the hook sets the sample
        {"Sim": step("seeds")},
        {"sims": "Sim/out"},
        approving=[
            {"action": "CheckSuccessRate", "args": THRESHOLD},
            {"action": "ManualApproval"},
        ],
        hooks={
            "ScoutingToApproving": {
                "hook": "ScoutInStages",
                "args": {**THRESHOLD, "stages": [1, 2, 4]},
            },
            "Active": {"hook": "OutputTarget", "args": {"target_events": 8}},
        },
    )


async def test_a_staged_scout_climbs_three_stages_and_is_signed_off(
    database: Database, tmp_path: Path
) -> None:
    async with running(database, tmp_path) as world:
        wg = await world.submit(staged())
        await world.start(wg)
        await world.reach(wg, W.APPROVING_BLOCKED)  # the sign-off nobody has given
        assert (await world.census(wg))["Sim"]["inputs"] == {"Processed": 4}
        assert (await world.statuses(wg))[1] == {"Sim": T.ACTIVE}

        sign_off = (await world.actions(wg))["workgraph/Approving/2"]
        await world.force(sign_off.ActionID, ActionResult.PASSED, "signed off")
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)
        assert (await world.census(wg))["Sim"]["inputs"] == {"Processed": 8}

        workgraph_log, member_logs = await world.logs(wg)
        (accepted,) = [
            r for r in workgraph_log if r.EventType == "StateChange" and r.OldStatus == W.SCOUTING
        ]
        assert (accepted.NewStatus, accepted.Message) == (
            W.APPROVING,
            "scout accepted: stage 3 of 3 (4 events) settled: "
            "100.0% of 4 settled inputs succeeded (0 Problematic)",
        )
        samples = [
            _args(r.Data["args"]).get("scouting_events")
            for r in member_logs["Sim"]
            if r.EventType == "FeederArgs"
            and _args(r.Data["args"]).get("scouting_events")
            != _args(r.Data["previous"]).get("scouting_events")
        ]
        assert samples == [1, 2, 4]  # one stage at a time, each settled before the next


def _args(value: Any) -> dict[str, Any]:
    return dict(json.loads(value) if isinstance(value, str) else value or {})


# -- stripping with ancestors ---------------------------------------------------------------------


async def _lineage(world: World) -> None:
    """Four RAW files, each reconstructed into one RDST whose metadata names its RAW parent."""
    raw = [CatalogueFile(lfn=f"/lhcb/e2e/strip/raw{n}", size=5) for n in range(4)]
    rdst = [
        CatalogueFile(
            lfn=f"/lhcb/e2e/strip/rdst{n}",
            size=3,
            metadata={"file_type": "RDST", "run": 7, "ancestors": [f"/lhcb/e2e/strip/raw{n}"]},
        )
        for n in range(4)
    ]
    await world.catalogue.register([*raw, *rdst])


def stripping() -> dict[str, Any]:
    strip = {
        "hints": {
            "dirac:Transformation": {
                "driving_input": "files",
                "packer": {
                    "name": "AncestorLookup",
                    "args": {"ancestor_input": "raw", "group_size": 2},
                },
            }
        },
        "run": tool("raw"),
        "in": {"files": "rdst"},
        "out": ["out", "status-report"],
    }
    rdst = {
        "type": {"type": "array", "items": ["File", "string"]},
        "dirac:Feeder": {
            "name": "LHCbAncestors",
            "args": {"file_type": "RDST", "exhaust_after_pass": True},
        },
    }
    return workgraph({"rdst": rdst}, {"Strip": strip}, {"stripped": "Strip/out"})


async def test_a_stripping_is_fed_its_files_ancestors_from_the_catalogues_lineage(
    database: Database, tmp_path: Path
) -> None:
    async with running(database, tmp_path) as world:
        await _lineage(world)
        wg = await world.submit(stripping())
        await world.start(wg)
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        fed = {r.LFN: r.Descriptor for r in await world.inputs(wg, "Strip")}
        assert fed == {
            f"/lhcb/e2e/strip/rdst{n}": {"run": 7, "ancestors": [f"/lhcb/e2e/strip/raw{n}"]}
            for n in range(4)
        }
        parameters = await done_parameters(world, wg, "Strip")
        assert len(parameters) == 2
        for carried in parameters:
            rdst = [_lfn(f).removeprefix("/lhcb/e2e/strip/rdst") for f in carried["files"]]
            raw = [_lfn(f).removeprefix("/lhcb/e2e/strip/raw") for f in carried["raw"]]
            assert rdst == raw and len(rdst) == 2  # each file with its own ancestor


# -- a simulation whose histograms are merged ------------------------------------------------------


def histogrammed(source: str) -> dict[str, Any]:
    """A step of the world's tool with a second output, `hist`, its monitoring histograms,
    merged at Finalizing."""
    made = step(
        source,
        actions={"Finalizing": [{"action": "MergeHistograms", "args": {"output": "hist"}}]},
    )
    made["run"]["outputs"]["hist"] = {"type": "File", "outputBinding": {"glob": "hist.json"}}
    made["out"] = ["out", "hist", "status-report"]
    return made


async def _merge_parcels(world: World) -> list[Any]:
    p, c = execution.parcels, execution.compute_parcels
    async with world.database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(p.c.ParcelID, p.c.Status, p.c.TransformationID, c.c.Parameters)
            .select_from(p.join(c, c.c.ParcelID == p.c.ParcelID))
            .where(p.c.TransformationID.is_(None))
        )
        return list(rows)


async def test_a_simulations_histograms_are_merged_in_one_last_parcel_per_member(
    launch: Launch,
) -> None:
    null = NullSettings(name="null", outputs=["out", "hist"])
    async with launch(null=null) as world:
        wg = await world.submit(
            workgraph(
                {"seeds": seeds(4)},
                {"Sim": histogrammed("seeds"), "Reco": histogrammed("Sim/out")},
                {"recos": "Reco/out", "sim-histograms": "Sim/hist", "reco-histograms": "Reco/hist"},
                hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": 4}}},
            )
        )
        await world.start(wg)
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        actions = await world.actions(wg)
        # Every parcel of no transformation (another scenario's on this database among them).
        merges = await _merge_parcels(world)
        for name in ("Sim", "Reco"):
            histograms = sorted(await world.produced(wg, f"{name}/hist"))
            assert len(histograms) == 4
            (merge,) = [
                m
                for m in merges
                if sorted(_lfn(f) for f in m.Parameters["histograms"]) == histograms
            ]
            assert merge.Status == "Done"
            merged = actions[f"{name}/Finalizing/1"]
            assert (merged.Result, merged.Message) == (
                ActionResult.PASSED,
                f"merged 4 histograms under hist in parcel {id_to_str(bytes(merge.ParcelID))}",
            )

        # Forward lineage from a seed, which has no LFN: from the input itself.
        seed = (await world.inputs(wg, "Sim"))[0]
        walk = await world.execution.ListDescendants(
            execution_pb2.ListDescendantsRequest(
                transformation_id=wg.members["Sim"], input_id=id_to_str(bytes(seed.InputID))
            )
        )
        first, *rest = walk.records
        assert (first.depth, first.input.lfn, first.input.descriptor_json) == (
            1,
            "",
            json.dumps(seed.Descriptor, separators=(",", ":")),
        )
        made = {o.lfn for o in first.outputs if o.output_name == "out"}
        assert {r.input.lfn for r in rest if r.depth == 2} == made
        assert {r.input.transformation_id for r in rest} == {wg.members["Reco"]}
