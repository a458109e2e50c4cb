"""The built-in actions' decisions, each against doubles of what it reads (counts, parcels,
outputs, the catalogue, the plugin registry)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from lifecycle_doubles import MemoryCounts, MemoryExecution, MemorySiblings

from dxts.core.builtins import actions as a
from dxts.core.builtins.thresholds import SuccessRateSettings
from dxts.core.catalogue import (
    CatalogueFile,
    CatalogueSettings,
    FileCatalogue,
    LocalFileCatalogue,
)
from dxts.core.plugins import (
    FileInput,
    Input,
    InputRecord,
    NoMoreInputs,
    PluginArgs,
    Providers,
    SetFeederState,
    Transformation,
)
from dxts.core.plugins.protocols.lifecycle import CleanMode, OutputRecord, ParcelRecord
from dxts.core.plugins.registry import Registry
from dxts.core.states import (
    ActionResult,
    InputStatus,
    Kind,
    ParcelStatus,
    TransformationStatus,
)

I, P, R = InputStatus, ParcelStatus, ActionResult  # noqa: E741
SETTINGS = SuccessRateSettings(minimum=0.9, sample=10)


def member(
    name: str = "reco",
    *,
    kind: Kind = Kind.COMPUTE,
    feeder: str | None = "List",
    args: dict[str, Any] | None = None,
    status: TransformationStatus = TransformationStatus.FINALIZING,
) -> Transformation:
    return Transformation(
        id=uuid.uuid4(),
        type="Test",
        kind=kind,
        status=status,
        feeder=feeder,
        feeder_args=args or {},
        feeder_enabled=False,
        packer="PerInput",
        packer_args={},
        annotations={"id": name},
    )


def record(lfn: str | None = None, descriptor: dict[str, Any] | None = None) -> InputRecord:
    return InputRecord(id=uuid.uuid4(), lfn=lfn, lfn_size=1, descriptor=descriptor)


@pytest.fixture
async def catalogue(tmp_path: Any) -> AsyncIterator[FileCatalogue]:
    local = LocalFileCatalogue(CatalogueSettings(url=f"sqlite+aiosqlite:///{tmp_path}/c.sqlite"))
    await local.start()
    try:
        yield local
    finally:
        await local.close()


# -- CheckSuccessRate ----------------------------------------------------------------------------


def success(overviews: list[dict[InputStatus, int]], **args: Any) -> Any:
    members = [member(f"m{i}") for i in range(len(overviews))]
    return a.check_success_rate(
        transformations=members,
        input_overviews={m.id: o for m, o in zip(members, overviews, strict=True)},
        args=a.SuccessArgs(**args),
        settings=SETTINGS,
    )


def test_check_success_rate_judges_fates_over_every_member() -> None:
    passing = success([{I.PROCESSED: 9}, {I.PROCESSED: 10, I.PROBLEMATIC: 1, I.SPLIT: 4}])
    assert passing.result is R.PASSED
    assert "95.0% of 20" in passing.message
    failing = success([{I.PROCESSED: 8}, {I.PROCESSED: 8, I.PROBLEMATIC: 4}])
    assert failing.result is R.FAILED and "80.0% of 20" in failing.message
    assert success([{I.PROCESSED: 16, I.PROBLEMATIC: 4}], min_success_rate=0.8).result is R.PASSED


def test_check_success_rate_needs_its_sample() -> None:
    # Still at work: Pending; nothing left in flight: the scout was too small, Failed.
    assert success([{I.PROCESSED: 5, I.ASSIGNED: 3}]).result is R.PENDING
    small = success([{I.PROCESSED: 5, I.NOT_PROCESSED: 9}])
    assert small.result is R.FAILED and "extend the scout" in small.message
    assert success([{I.PROCESSED: 5}], min_sample=5).result is R.PASSED
    few = success([{I.PROCESSED: 20}], min_passed=80)
    assert few.result is R.FAILED and "80 needed" in few.message


# -- EstimateResourceUsage -----------------------------------------------------------------------


def parcel(status: ParcelStatus = P.DONE, **usage: float) -> ParcelRecord:
    return ParcelRecord(uuid.uuid4(), Kind.COMPUTE, status, "local", {"usage": usage})


async def estimate(
    execution: MemoryExecution,
    members: list[Transformation],
    settings: a.EstimateSettings | None = None,
    **args: Any,
) -> Any:
    return await a.estimate_resource_usage(
        transformations=members,
        args=a.EstimateArgs(**args),
        settings=settings or a.EstimateSettings(),
        execution=execution,
    )


async def test_estimate_writes_measured_needs_into_the_templates() -> None:
    sim, merge = member("sim"), member("merge")
    data = member("replicate", kind=Kind.DATA)
    execution = MemoryExecution()
    execution.parcel_rows[sim.id] += [
        parcel(cpu_hours=1.0, memory_gb=2.0),
        parcel(P.PARTIALLY_DONE, cpu_hours=2.5, memory_gb=1.5),
        parcel(P.FAILED, cpu_hours=99.0, memory_gb=99.0),  # failed parcels measure nothing
    ]
    execution.parcel_rows[data.id].append(parcel(cpu_hours=50.0))
    result = await estimate(execution, [sim, merge, data], max_cpu_hours=10, max_memory_gb=4)
    assert result.result is R.PASSED
    assert result.updated_requirements == {sim.id: {"cpu_hours": 3.0, "memory_gb": 2.4}}


async def test_estimate_fails_above_the_limits_or_without_measurements() -> None:
    sim = member("sim")
    execution = MemoryExecution()
    execution.parcel_rows[sim.id].append(parcel(cpu_hours=12.0, memory_gb=1.0))
    high = await estimate(execution, [sim], max_cpu_hours=10)
    assert high.result is R.FAILED and "sim used 12 cpu_hours" in high.message
    bare = member("bare")
    assert (await estimate(MemoryExecution(), [bare], max_cpu_hours=10)).result is R.FAILED
    unchanged = await estimate(MemoryExecution(), [bare])
    assert unchanged.result is R.PASSED and unchanged.updated_requirements == {}


def test_percentiles_are_nearest_rank() -> None:
    measured = [4.0, 1.0, 3.0, 2.0]
    assert [a.percentile(measured, p) for p in (25, 50, 75, 95, 100)] == [1.0, 2.0, 3.0, 4.0, 4.0]
    assert a.percentile([7.0], 50) == 7.0


async def test_estimate_takes_percentiles_capped_and_says_from_how_many_parcels() -> None:
    sim = member("sim")
    execution = MemoryExecution()
    execution.parcel_rows[sim.id] += [
        parcel(cpu_hours=float(n), memory_gb=float(n), wall_hours=2.0 * n) for n in range(1, 21)
    ]
    caps = a.EstimateSettings(max_wall_hours=30)
    result = await estimate(execution, [sim], caps, cpu_percentile=50, margin=1.5)
    assert result.result is R.PASSED
    # cpu p50 of 1..20 = 10 (x1.5); memory p75 = 15 (x1.5); wall p95 = 38 x 1.5, capped at 30.
    assert result.updated_requirements == {
        sim.id: {"cpu_hours": 15.0, "memory_gb": 22.5, "wall_hours": 30.0}
    }
    derived = result.derivations[sim.id]
    assert derived["cpu_hours"] == {
        "percentile": 50,
        "parcels": 20,
        "measured": 10.0,
        "margin": 1.5,
    }
    assert derived["wall_hours"]["capped_at"] == 30
    assert "sim: cpu_hours 15 (p50 of 20 parcels x 1.5)" in result.message


async def test_downstream_members_inherit_the_nearest_estimate_scaled() -> None:
    # sim → stage (data) → reco → merge through Edges; fit is fed by nothing, tune measured.
    sim = member("sim")
    stage = replace(member("stage", kind=Kind.DATA), producer_id=sim.id)
    reco = replace(member("reco"), producer_id=stage.id)
    merge = replace(member("merge"), producer_id=reco.id)
    fit, tune = member("fit"), replace(member("tune"), producer_id=sim.id)
    execution = MemoryExecution()
    execution.parcel_rows[sim.id].append(parcel(cpu_hours=10.0, memory_gb=2.0, wall_hours=20.0))
    execution.parcel_rows[tune.id].append(parcel(cpu_hours=1.0))
    caps = a.EstimateSettings(max_memory_gb=2.5, max_wall_hours=5)
    scale = {"cpu_hours": 0.25, "memory_gb": 1.5, "wall_hours": 0.5}
    members = [merge, reco, stage, sim, fit, tune]
    result = await estimate(execution, members, caps, margin=1, downstream_scale=scale)
    assert result.result is R.PASSED
    # From sim's template as written (its wall time capped at 5), within the caps again.
    inherited = {"cpu_hours": 2.5, "memory_gb": 2.5, "wall_hours": 2.5}
    assert result.updated_requirements == {
        sim.id: {"cpu_hours": 10.0, "memory_gb": 2.0, "wall_hours": 5.0},
        tune.id: {"cpu_hours": 1.0},
        reco.id: inherited,
        merge.id: inherited,  # from sim, scaled once: the nearest estimate, not reco's
    }
    assert result.derivations[merge.id]["cpu_hours"] == {
        "inherited_from": "sim",
        "estimate": 10.0,
        "scale": 0.25,
    }
    assert result.derivations[reco.id]["memory_gb"]["capped_at"] == 2.5
    assert "reco: cpu_hours 2.5 (sim's 10 x 0.25)" in result.message


async def test_downstream_inheritance_takes_only_the_measures_scaled() -> None:
    sim = member("sim")
    merge = replace(member("merge"), producer_id=sim.id)
    execution = MemoryExecution()
    execution.parcel_rows[sim.id].append(parcel(cpu_hours=4.0, memory_gb=2.0))
    alone = await estimate(execution, [sim, merge], margin=1)
    assert set(alone.updated_requirements) == {sim.id}  # no downstream_scale: nothing inherited
    memory_only = await estimate(
        execution, [sim, merge], margin=1, downstream_scale={"memory_gb": 2, "wall_hours": 3}
    )
    assert memory_only.updated_requirements[merge.id] == {"memory_gb": 4.0}
    with pytest.raises(ValueError):
        a.EstimateArgs(downstream_scale={"disk_gb": 1.0})
    with pytest.raises(ValueError):
        a.EstimateArgs(downstream_scale={"cpu_hours": 0})


def test_manual_approval_fails_until_forced() -> None:
    result = a.manual_approval(args=a.SignOffArgs(role="mc_production_manager"))
    assert result.result is R.FAILED and "mc_production_manager" in result.message


# -- Finalizing ----------------------------------------------------------------------------------


async def test_no_input_processed_twice() -> None:
    reco = member()
    execution = MemoryExecution()
    once, twice = uuid.uuid4(), uuid.uuid4()
    first, second = uuid.uuid4(), uuid.uuid4()
    execution.success_rows[reco.id] += [(first, once), (first, twice)]
    good = await a.no_input_processed_twice(transformation=reco, execution=execution)
    assert good.result is R.PASSED and "each of 2" in good.message
    execution.success_rows[reco.id].append((second, twice))
    bad = await a.no_input_processed_twice(transformation=reco, execution=execution)
    assert bad.result is R.FAILED and str(twice) in bad.message


class ListArgs(PluginArgs):
    lfns: list[str]


def listing_feeder(*, feeder_args: ListArgs, feeder_state: dict[str, Any]) -> Any:
    """Yields its files; honours a bookmark, so a reconciliation must run it without one."""
    start = int(feeder_state.get("next", 0))
    for lfn in feeder_args.lfns[start:]:
        yield FileInput(lfn=lfn, lfn_size=1)
    yield SetFeederState({"next": len(feeder_args.lfns)})
    yield NoMoreInputs()


async def test_reconcile_reruns_the_feeder_without_bookmark_and_reports_misses() -> None:
    registry = Registry.of({"feeder": {"Listing": listing_feeder}})
    reco = member(feeder="Listing", args={"lfns": ["/a", "/b", "/c"]})
    execution = MemoryExecution()
    execution.input_rows[reco.id] += [record("/a"), record("/c")]
    missed = await a.reconcile_feeder_inputs(
        transformation=reco, registry=registry, execution=execution
    )
    assert missed.result is R.FAILED
    assert missed.message.startswith("1 of 3 inputs") and "/b" in missed.message
    assert execution.calls == []  # reports, never repairs
    execution.input_rows[reco.id].append(record("/b"))
    whole = await a.reconcile_feeder_inputs(
        transformation=reco, registry=registry, execution=execution
    )
    assert whole.result is R.PASSED


class BatchArgs(PluginArgs):
    seeds: int
    batch: int


def batching_feeder(*, feeder_args: BatchArgs, feeder_state: dict[str, Any]) -> Any:
    """Like Seeds with `batch`: a batch per invocation from its cursor, never exhausted."""
    start = int(feeder_state.get("next_seed", 0))
    end = min(start + feeder_args.batch, feeder_args.seeds)
    for seed in range(start, end):
        yield Input(descriptor={"seed": seed})
    if end > start:
        yield SetFeederState({"next_seed": end})


def repassing_feeder(*, feeder_args: ListArgs, feeder_state: dict[str, Any]) -> Any:
    """Like a Query: each invocation is a whole pass again over the same selection."""
    for lfn in feeder_args.lfns:
        yield FileInput(lfn=lfn, lfn_size=1)
    yield SetFeederState({"passes": int(feeder_state.get("passes", 0)) + 1})


async def test_reconcile_follows_a_batching_feeder_through_every_batch() -> None:
    registry = Registry.of({"feeder": {"Batches": batching_feeder}})
    sim = member(feeder="Batches", args={"seeds": 7, "batch": 3})
    execution = MemoryExecution()
    execution.input_rows[sim.id] += [record(descriptor={"seed": s}) for s in range(7) if s != 5]
    missed = await a.reconcile_feeder_inputs(
        transformation=sim, registry=registry, execution=execution
    )
    assert missed.result is R.FAILED
    assert missed.message.startswith("1 of 7 inputs") and '{"seed":5}' in missed.message
    execution.input_rows[sim.id].append(record(descriptor={"seed": 5}))
    whole = await a.reconcile_feeder_inputs(
        transformation=sim, registry=registry, execution=execution
    )
    assert whole.result is R.PASSED and "all 7 inputs" in whole.message


async def test_reconcile_stops_when_a_feeder_only_repeats_itself() -> None:
    registry = Registry.of({"feeder": {"Passes": repassing_feeder}})
    reco = member(feeder="Passes", args={"lfns": ["/a", "/b"]})
    execution = MemoryExecution()
    execution.input_rows[reco.id] += [record("/a"), record("/b")]
    result = await a.reconcile_feeder_inputs(
        transformation=reco, registry=registry, execution=execution
    )
    assert result.result is R.PASSED and "all 2 inputs" in result.message


async def test_reconcile_compares_an_edge_with_its_producer_by_lfn() -> None:
    output = uuid.uuid4()
    reco = member(feeder="Edge", args={"transformation_output_id": str(output)})
    producer = uuid.uuid4()
    execution = MemoryExecution()
    execution.output_rows[producer] += [
        OutputRecord(output, "sim-files", True, uuid.uuid4(), lfn) for lfn in ("/s1", "/s2")
    ]
    execution.output_rows[producer].append(
        OutputRecord(uuid.uuid4(), "other", False, uuid.uuid4(), "/elsewhere")
    )
    execution.input_rows[reco.id].append(record("/s1"))
    registry = Registry.of({})
    missed = await a.reconcile_feeder_inputs(
        transformation=reco, registry=registry, execution=execution
    )
    assert (
        missed.result is R.FAILED and "/s2" in missed.message and "/elsewhere" not in missed.message
    )
    execution.input_rows[reco.id].append(record("/s2"))
    result = await a.reconcile_feeder_inputs(
        transformation=reco, registry=registry, execution=execution
    )
    assert result.result is R.PASSED


async def test_check_output_files_against_the_catalogue(catalogue: FileCatalogue) -> None:
    reco = member()
    execution = MemoryExecution()
    out = uuid.uuid4()
    execution.output_rows[reco.id] += [
        OutputRecord(out, "reco", False, uuid.uuid4(), f"/reco/{i}") for i in range(3)
    ]
    await catalogue.register(
        [
            CatalogueFile(lfn="/reco/0", size=1, replicas=("CERN",)),
            CatalogueFile(lfn="/reco/1", size=1),
        ]
    )
    result = await a.check_output_files(
        transformation=reco, execution=execution, catalogue=catalogue
    )
    assert result.result is R.FAILED
    assert "/reco/1 has no replica" in result.message
    assert "/reco/2 is not in the catalogue" in result.message
    await catalogue.register(
        [
            CatalogueFile(lfn="/reco/1", size=1, replicas=("RAL",)),
            CatalogueFile(lfn="/reco/2", size=1, replicas=("RAL",)),
        ]
    )
    good = await a.check_output_files(transformation=reco, execution=execution, catalogue=catalogue)
    assert good.result is R.PASSED and "all 3" in good.message


def test_every_input_settled() -> None:
    assert (
        a.every_input_settled(
            input_overview={I.PROCESSED: 3, I.SPLIT: 1, I.NOT_PROCESSED: 2, I.UNASSIGNED: 0}
        ).result
        is R.PASSED
    )
    open_ = a.every_input_settled(input_overview={I.PROCESSED: 3, I.PROBLEMATIC: 2})
    assert open_.result is R.FAILED and "2 Problematic" in open_.message


async def test_only_unprocessed_remain_after_a_removal() -> None:
    workgraph = uuid.uuid4()
    removal = replace(member("removal", kind=Kind.DATA), workgraph_id=workgraph)
    reco = replace(member("reco"), workgraph_id=workgraph)
    siblings = MemorySiblings({workgraph: {"reco": reco, "removal": removal}})
    execution = MemoryExecution()

    def inputs(rows: dict[str, InputStatus]) -> list[InputRecord]:
        return [replace(record(lfn), status=status) for lfn, status in rows.items()]

    execution.input_rows[reco.id] += inputs(
        {"/f1": I.PROCESSED, "/f2": I.PROCESSED, "/f3": I.NOT_PROCESSED}
    )
    execution.input_rows[removal.id] += inputs(
        {"/f1": I.PROCESSED, "/f2": I.NOT_PROCESSED, "/f3": I.NOT_PROCESSED}
    )

    async def run(consumer: str = "reco") -> Any:
        return await a.only_unprocessed_remain(
            transformation=removal,
            args=a.ConsumerArgs(consumer=consumer),
            execution=execution,
            siblings=siblings,
        )

    kept = await run()
    assert (
        kept.result is R.FAILED and "/f2 was processed by reco and is still there" in kept.message
    )
    execution.input_rows[removal.id][1] = replace(
        execution.input_rows[removal.id][1], status=I.PROCESSED
    )
    assert (await run()).result is R.PASSED
    execution.input_rows[removal.id][2] = replace(
        execution.input_rows[removal.id][2], status=I.PROCESSED
    )
    lost = await run()
    assert lost.result is R.FAILED and "/f3 was removed though reco did not" in lost.message
    assert (await run("ghost")).result is R.FAILED


# -- Archiving and Cleaning ----------------------------------------------------------------------


async def test_removals_split_outputs_by_the_intermediate_flag(
    catalogue: FileCatalogue,
) -> None:
    sim = member("sim", status=TransformationStatus.CANCELLING)
    execution = MemoryExecution()
    execution.output_rows[sim.id] += [
        OutputRecord(uuid.uuid4(), "sim", True, uuid.uuid4(), "/tmp/1"),
        OutputRecord(uuid.uuid4(), "sim", True, uuid.uuid4(), "/tmp/2"),
        OutputRecord(uuid.uuid4(), "data", False, uuid.uuid4(), "/data/1"),
    ]
    await catalogue.register(
        [CatalogueFile(lfn=lfn, size=1) for lfn in ("/tmp/1", "/tmp/2", "/data/1")]
    )
    intermediates = await a.remove_intermediate_files(
        transformation=sim, execution=execution, catalogue=catalogue
    )
    assert intermediates.result is R.DONE and intermediates.message.startswith("2 of 2")
    assert set(await catalogue.files(["/tmp/1", "/tmp/2", "/data/1"])) == {"/data/1"}
    again = await a.remove_intermediate_files(
        transformation=sim, execution=execution, catalogue=catalogue
    )
    assert again.result is R.DONE and again.message.startswith("0 of 2")  # idempotent
    outputs = await a.remove_output_files(
        transformation=sim, execution=execution, catalogue=catalogue
    )
    assert outputs.result is R.DONE and await catalogue.files(["/data/1"]) == {}


async def test_cancel_in_flight_parcels_is_pending_until_every_parcel_is_terminal() -> None:
    sim = member("sim", status=TransformationStatus.CANCELLING)
    counts, execution = MemoryCounts(), MemoryExecution()
    counts.set(sim.id, parcels={P.ASSIGNED: 2, P.UNASSIGNED: 1, P.DONE: 4})
    overview = {I.UNASSIGNED: 5, I.ASSIGNED: 3, I.PROCESSED: 4}

    async def run() -> Any:
        return await a.cancel_in_flight_parcels(
            transformation=sim, input_overview=overview, counts=counts, control=execution
        )

    first = await run()
    assert first.result is R.PENDING
    assert execution.called("cancel_in_flight") == [sim.id]
    assert execution.called("write_off_waiting") == [sim.id]
    # The backends are cancelling: nothing is asked again, still Pending.
    counts.set(sim.id, parcels={P.COMPLETING: 3, P.DONE: 4})
    overview = {I.ASSIGNED: 3, I.NOT_PROCESSED: 5, I.PROCESSED: 4}
    assert (await run()).result is R.PENDING
    assert len(execution.calls) == 2
    counts.set(sim.id, parcels={P.CANCELLED: 3, P.DONE: 4})
    overview = {I.NOT_PROCESSED: 8, I.PROCESSED: 4}
    assert (await run()).result is R.DONE
    assert len(execution.calls) == 2


async def test_clean_database_entries_calls_until_complete() -> None:
    archiving = member("sim", status=TransformationStatus.ARCHIVING)
    cancelling = member("reco", status=TransformationStatus.CANCELLING)
    execution = MemoryExecution()
    execution.clean_batches[archiving.id] = 3
    execution.clean_batches[cancelling.id] = 5

    async def run(transformation: Transformation, calls: int) -> Any:
        return await a.clean_database_entries(
            transformation=transformation, args=a.CleanArgs(calls=calls), control=execution
        )

    assert (await run(archiving, 10)).result is R.DONE
    assert [m for name, t, m in execution.calls if t == archiving.id] == [CleanMode.ARCHIVE] * 3
    pending = await run(cancelling, 2)
    assert pending.result is R.PENDING and "200 rows" in pending.message
    assert (await run(cancelling, 2)).result is R.PENDING
    assert (await run(cancelling, 2)).result is R.DONE
    assert {m for name, t, m in execution.calls if t == cancelling.id} == {CleanMode.CLEAN}


async def test_actions_run_through_the_registry_with_injection(
    catalogue: FileCatalogue,
) -> None:
    """The lifecycle's providers satisfy every built-in action's annotations."""
    from dxts.core.plugins.protocols.lifecycle import (
        Counts,
        ExecutionControl,
        ExecutionView,
        Siblings,
    )

    providers = Providers()
    execution = MemoryExecution()
    providers.add(Counts, MemoryCounts())
    providers.add(Siblings, MemorySiblings())
    providers.add(ExecutionView, execution)
    providers.add(ExecutionControl, execution)
    providers.add(FileCatalogue, catalogue)
    registry = Registry.discover(providers=providers)
    providers.add(Registry, registry)
    lifecycle = {
        "dxts.core.builtins.actions",
        "dxts.core.builtins.lifecycle_hooks",
    }
    built_in = [p for p in registry if p.function.__module__ in lifecycle]
    assert len(built_in) == 16
    missing = [
        (p.name, i.parameter)
        for p in built_in
        for i in p.injections
        if not providers.can_provide(i.annotation)
    ]
    assert missing == []
    sim = member("sim", status=TransformationStatus.ARCHIVING)
    result = await registry.call(
        "Archiving",
        "CleanDatabaseEntries",
        None,
        phase="active",
        transformation=sim,
        input_overview={},
    )
    assert result.result is R.DONE


def test_the_lifecycle_built_ins_pass_another_process_start_up_check() -> None:
    """Execution checks every installed plugin at start-up with its own providers only: the
    lifecycle's services are optional there, so they do not stop it."""
    from dxts.core.plugins.protocols.readers import (
        InputOverviewReader,
        ParcelOutputReader,
        PartnerLookup,
    )

    registry = Registry.discover()
    for annotation in (InputOverviewReader, ParcelOutputReader, PartnerLookup, FileCatalogue):
        registry.providers.add(annotation, object())
    registry.check()


async def test_an_action_without_its_service_is_unavailable() -> None:
    from dxts.core.errors import Unavailable

    with pytest.raises(Unavailable, match="ExecutionView"):
        await a.no_input_processed_twice(transformation=member())
