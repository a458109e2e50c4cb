"""The built-in lifecycle hooks' decisions: ScoutUntilSettled, OutputTarget, PeriodicFlush."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from lifecycle_doubles import MemoryExecution

from dxts.core.builtins.lifecycle_hooks import (
    PAUSED_ON_FAILURES,
    WINDOW,
    FlushArgs,
    ScoutArgs,
    TargetArgs,
    output_target,
    periodic_flush,
    scout_until_settled,
)
from dxts.core.builtins.thresholds import SuccessRateSettings
from dxts.core.plugins import Accept, InputRecord, Operation, Transformation, Workgraph
from dxts.core.plugins.errors import PluginFailed
from dxts.core.plugins.proposals import HOOK_MEMORY
from dxts.core.plugins.protocols.lifecycle import ExecutionView, OutputRecord
from dxts.core.plugins.providers import Providers
from dxts.core.plugins.registry import Registry
from dxts.core.states import InputStatus, Kind, TransformationStatus, WorkgraphStatus

I = InputStatus  # noqa: E741
SETTINGS = SuccessRateSettings(minimum=0.9, sample=10)
SEEDS = {"target_events": 100, "events_per_seed": 10, "scouting_events": 30}


def member(
    name: str,
    *,
    feeder: str | None = "Seeds",
    args: dict[str, Any] | None = None,
    enabled: bool = True,
    status: TransformationStatus = TransformationStatus.ACTIVE,
    annotations: dict[str, Any] | None = None,
    upstream: tuple[Transformation, ...] = (),
) -> Transformation:
    return Transformation(
        id=uuid.uuid4(),
        type="Test",
        kind=Kind.COMPUTE,
        status=status,
        feeder=feeder,
        feeder_args=dict(SEEDS if args is None else args),
        feeder_enabled=enabled,
        packer="PerInput",
        packer_args={},
        annotations={"id": name, **(annotations or {})},
        upstream_ids=tuple(t.id for t in upstream),
    )


def workgraph(target: dict[str, Any] | None = None) -> Workgraph:
    return Workgraph(
        id=uuid.uuid4(),
        type="Test",
        status=WorkgraphStatus.ACTIVE,
        annotations={"target": target} if target else {},
    )


# -- ScoutUntilSettled ---------------------------------------------------------------------------


def accepted(result: Any) -> bool:
    return isinstance(result, Accept)


async def scout(
    members: list[Transformation],
    overviews: dict[uuid.UUID, dict[InputStatus, int]],
    scout_round: int = 0,
    execution: MemoryExecution | None = None,
    **args: Any,
) -> Any:
    scouting = Workgraph(
        id=uuid.uuid4(),
        type="Test",
        status=WorkgraphStatus.SCOUTING,
        annotations={"scout_round": scout_round} if scout_round else {},
    )
    return await scout_until_settled(
        workgraph=scouting,
        transformations=members,
        input_overviews=overviews,
        args=ScoutArgs(**args),
        settings=SETTINGS,
        execution=execution or MemoryExecution(),
    )


async def test_scout_waits_while_work_is_in_flight() -> None:
    sim, reco = member("sim"), member("reco", feeder="Edge", args={})
    overviews = {sim.id: {I.PROCESSED: 3, I.ASSIGNED: 2}, reco.id: {}}
    assert await scout([sim, reco], overviews) == {}


async def test_scout_waits_for_a_member_that_has_had_no_input_yet() -> None:
    sim, reco = member("sim"), member("reco", feeder="Edge", args={})
    overviews = {sim.id: {I.PROCESSED: 3}, reco.id: {}}
    assert await scout([sim, reco], overviews) == {}
    # Once the downstream member has its sample settled, it accepts.
    overviews[reco.id] = {I.PROCESSED: 1}
    assert accepted(await scout([sim, reco], overviews))
    # A member whose feeder is off with nothing yet is waited for, not settled on no sample.
    off = member("reco", feeder="Edge", args={}, enabled=False)
    assert await scout([sim, off], {sim.id: {I.PROCESSED: 3}, off.id: {}}) == {}
    assert accepted(await scout([sim, off], {sim.id: {I.PROCESSED: 3}, off.id: {I.PROCESSED: 2}}))


async def test_scout_waits_for_an_edge_member_to_be_fed_every_file_produced() -> None:
    sims = uuid.uuid4()
    sim = member("sim")
    reco = member("reco", feeder="Edge", args={"transformation_output_id": str(sims)})
    execution = MemoryExecution()
    execution.output_rows[sim.id] += [
        OutputRecord(sims, "out", True, uuid.uuid4(), f"/sim/{n}") for n in range(3)
    ]
    execution.input_rows[reco.id] += [
        InputRecord(uuid.uuid4(), f"/sim/{n}", 1, None, I.PROCESSED) for n in (0, 1)
    ]
    # Reco processed the two files fed so far; the third is made but not fed yet.
    settled = {sim.id: {I.PROCESSED: 3}, reco.id: {I.PROCESSED: 2}}
    assert await scout([sim, reco], settled, execution=execution) == {}
    execution.input_rows[reco.id].append(InputRecord(uuid.uuid4(), "/sim/2", 1, None, I.PROCESSED))
    fed = {sim.id: {I.PROCESSED: 3}, reco.id: {I.PROCESSED: 3}}
    assert accepted(await scout([sim, reco], fed, execution=execution))


async def test_scout_waits_for_a_file_fed_after_the_overviews_were_read() -> None:
    """The overviews are read before the hook lists the member's inputs: a file fed in between
    is in neither the overview nor settled. Counting it as fed accepted the scout with it
    Unassigned behind BySize, which then held it with no flush to come."""
    sims = uuid.uuid4()
    sim = member("sim")
    reco = member("reco", feeder="Edge", args={"transformation_output_id": str(sims)})
    execution = MemoryExecution()
    execution.output_rows[sim.id] += [
        OutputRecord(sims, "out", True, uuid.uuid4(), f"/sim/{n}") for n in range(3)
    ]
    execution.input_rows[reco.id] += [
        InputRecord(uuid.uuid4(), f"/sim/{n}", 1, None, I.PROCESSED) for n in (0, 1)
    ]
    # What the overviews said just before the third file was fed.
    before = {sim.id: {I.PROCESSED: 3}, reco.id: {I.PROCESSED: 2}}
    third = InputRecord(uuid.uuid4(), "/sim/2", 1, None)
    execution.input_rows[reco.id].append(third)
    for status in (I.UNASSIGNED, I.ASSIGNED, I.FAILED):  # fed; packed or failed since
        execution.input_rows[reco.id][-1] = replace(third, status=status)
        assert await scout([sim, reco], before, execution=execution) == {}, status
    # The next round's overviews show it waiting: the member is flushed, not accepted.
    execution.input_rows[reco.id][-1] = third
    waiting = {sim.id: {I.PROCESSED: 3}, reco.id: {I.PROCESSED: 2, I.UNASSIGNED: 1}}
    assert await scout([sim, reco], waiting, execution=execution) == {
        reco.id: Operation(flush=True)
    }


async def test_scout_waits_for_a_seeds_member_whose_feeder_is_off_before_its_sample() -> None:
    sim = member("sim", enabled=False)  # 30 events asked, 10 per seed: 3 seeds
    assert await scout([sim], {sim.id: {I.PROCESSED: 2}}) == {}
    assert accepted(await scout([sim], {sim.id: {I.PROCESSED: 3}}))


async def test_scout_takes_its_sample_from_the_event_stages_one_per_round() -> None:
    bare = {"target_events": 100, "events_per_seed": 10}
    sim, reco = member("sim", args=bare), member("reco", feeder="Edge", args={})
    stages = [40, 80]
    # The first round's stage is set at once: the member has no sample of its own.
    first = await scout([sim, reco], {}, event_stages=stages)
    assert first == {
        sim.id: Operation(feeder_args={**bare, "scouting_events": 40}, feeder_enabled=True)
    }
    on_first = member("sim", args={**bare, "scouting_events": 40})
    settled = {on_first.id: {I.PROCESSED: 4}, reco.id: {I.PROCESSED: 2}}
    assert await scout([on_first, reco], {on_first.id: {I.PROCESSED: 3}}, event_stages=stages) == {}
    assert accepted(await scout([on_first, reco], settled, event_stages=stages))
    # An ExtendScout without arguments advanced the round: the next stage, then its sample.
    second = await scout([on_first, reco], settled, scout_round=1, event_stages=stages)
    assert second == {
        on_first.id: Operation(feeder_args={**bare, "scouting_events": 80}, feeder_enabled=True)
    }
    on_second = member("sim", args={**bare, "scouting_events": 80})
    half = {on_second.id: {I.PROCESSED: 4}, reco.id: {I.PROCESSED: 2}}
    assert await scout([on_second, reco], half, scout_round=1, event_stages=stages) == {}
    done = {on_second.id: {I.PROCESSED: 8}, reco.id: {I.PROCESSED: 4}}
    assert accepted(await scout([on_second, reco], done, scout_round=1, event_stages=stages))
    # Past the last stage the scout grows by the last step (40) a round: round 2 asks 120,
    # round 5 240 events.
    for round_, events in ((2, 120), (5, 240)):
        grown = await scout([on_second, reco], done, scout_round=round_, event_stages=stages)
        assert grown == {
            on_second.id: Operation(
                feeder_args={**bare, "scouting_events": events}, feeder_enabled=True
            )
        }
    # A larger sample an operator gave is kept.
    larger = member("sim", args={**bare, "scouting_events": 100})
    over = {larger.id: {I.PROCESSED: 10}, reco.id: {I.PROCESSED: 5}}
    assert accepted(await scout([larger, reco], over, scout_round=1, event_stages=stages))


async def test_scout_event_stages_ascend_and_a_seeds_member_needs_a_sample() -> None:
    with pytest.raises(ValueError, match="ascending"):
        ScoutArgs(event_stages=[80, 40])
    bare = member("sim", args={"target_events": 100, "events_per_seed": 10})
    with pytest.raises(ValueError, match="sim: no scout sample"):
        await scout([bare], {})


async def test_scout_ignores_members_held_until_approval() -> None:
    sim = member("sim")
    held = member("merge", status=TransformationStatus.NEW)
    assert accepted(await scout([sim, held], {sim.id: {I.PROCESSED: 3}, held.id: {}}))


async def test_scout_accepts_at_once_past_the_failure_threshold() -> None:
    sim = member("sim")
    failing = {sim.id: {I.PROCESSED: 7, I.PROBLEMATIC: 3, I.ASSIGNED: 50}}
    # The log says it was accepted early because it is failing, not as if it had settled.
    assert await scout([sim], failing) == Accept(
        "early, the failure threshold is crossed: 70.0% of 10 settled inputs succeeded "
        "(3 Problematic)"
    )
    assert await scout([sim], {sim.id: {I.PROCESSED: 3}}) == Accept(
        "the sample settled: 100.0% of 3 settled inputs succeeded (0 Problematic)"
    )
    # Below the minimum sample it is not judged yet, and a retried failure counts neither way.
    small = {sim.id: {I.PROCESSED: 2, I.PROBLEMATIC: 3, I.ASSIGNED: 50, I.FAILED: 9}}
    assert await scout([sim], small) == {}
    # The workgraph's own threshold overrides the installation's.
    assert await scout([sim], failing, min_success_rate=0.6) == {}


async def test_scout_flushes_a_member_whose_sample_only_waits_to_be_packed() -> None:
    sim, reco = member("sim"), member("reco", feeder="Edge", args={})
    overviews = {sim.id: {I.PROCESSED: 3}, reco.id: {I.UNASSIGNED: 2, I.PROCESSED: 1}}
    assert await scout([sim, reco], overviews) == {reco.id: Operation(flush=True)}
    assert await scout([sim, reco], overviews, flush_when_idle=False) == {}
    overviews[reco.id][I.ASSIGNED] = 1  # something runs: the packer is not holding back
    assert await scout([sim, reco], overviews) == {}


async def test_scout_climbs_its_ladder_one_settled_rung_at_a_time() -> None:
    stages = [{"sim": {"scouting_events": 100}}, {"sim": {"scouting_events": 1000}}]
    sim = member("sim")
    settled = {sim.id: {I.PROCESSED: 3}}
    first = await scout([sim], settled, stages=stages)
    assert first == {
        sim.id: Operation(feeder_args={**SEEDS, "scouting_events": 100}, feeder_enabled=True)
    }
    on_first = member("sim", args={**SEEDS, "scouting_events": 100}, enabled=False)
    second = await scout([on_first], {on_first.id: {I.PROCESSED: 10}}, stages=stages)
    assert second == {
        on_first.id: Operation(feeder_args={**SEEDS, "scouting_events": 1000}, feeder_enabled=True)
    }
    on_last = member("sim", args={**SEEDS, "scouting_events": 1000})
    assert accepted(await scout([on_last], {on_last.id: {I.PROCESSED: 100}}, stages=stages))
    # A rung not yet settled waits.
    assert await scout([on_last], {on_last.id: {I.ASSIGNED: 1}}, stages=stages) == {}


async def test_scout_refuses_a_ladder_naming_no_member() -> None:
    sim = member("sim")
    with pytest.raises(ValueError, match="no member called ghost"):
        await scout([sim], {sim.id: {I.PROCESSED: 3}}, stages=[{"ghost": {"x": 1}}])


# -- OutputTarget ---------------------------------------------------------------------------------


@pytest.fixture
def produced() -> MemoryExecution:
    """What the producers' parcels produced (ParcelOutputs, as execution shows them)."""
    return MemoryExecution()


async def register(
    produced: MemoryExecution, producer: Transformation, output: str, n: int, start: int = 0
) -> None:
    produced.output_rows[producer.id].extend(
        OutputRecord(
            transformation_output_id=uuid.uuid5(producer.id, output),
            name=output,
            intermediate=False,
            parcel_id=uuid.uuid4(),
            lfn=f"/lhcb/{producer.id}/{output}/{i}",
            size=1,
        )
        for i in range(start, start + n)
    )


async def target(
    produced: MemoryExecution,
    members: list[Transformation],
    overviews: dict[uuid.UUID, dict[InputStatus, int]] | None = None,
    *,
    document: dict[str, Any] | None = None,
    **args: Any,
) -> dict[uuid.UUID, Operation]:
    return await output_target(
        workgraph=workgraph(document),
        transformations=members,
        input_overviews=overviews or {},
        args=TargetArgs(**args),
        execution=produced,
    )


async def test_the_document_target_disables_the_external_feeders_once_reached(
    produced: MemoryExecution,
) -> None:
    sim = member("sim")
    query = member("stage", feeder="Query", args={})
    merge = member("merge", feeder="Edge", args={})
    members = [sim, query, merge]
    document = {"output": "datasets", "files": 3, "step": "merge", "step_output": "merged"}
    await register(produced, merge, "merged", 2)
    await register(produced, merge, "histograms", 5)  # another output does not count
    assert await target(produced, members, document=document) == {}
    await register(produced, merge, "merged", 1, start=2)
    assert await target(produced, members, document=document) == {
        sim.id: Operation(feeder_enabled=False),
        query.id: Operation(feeder_enabled=False),
    }
    # Arguments override the document's target.
    assert await target(produced, members, document=document, output="merge/merged", files=4) == {}


async def test_the_target_names_a_member(produced: MemoryExecution) -> None:
    with pytest.raises(ValueError, match="no member"):
        await target(produced, [member("sim")], output="ghost/out", files=1)


async def test_an_event_target_raises_seeds_in_steps_and_ends_them(
    produced: MemoryExecution,
) -> None:
    sim = member("sim", args={"target_events": 30, "events_per_seed": 10})
    pace = {"target_events": 100, "step_events": 30, "floor_events": 15}
    # Caught up (3 seeds for 30 events) with 20 events in flight: above the floor, wait.
    busy = {sim.id: {I.PROCESSED: 1, I.ASSIGNED: 2}}
    assert await target(produced, [sim], busy, **pace) == {}
    # In flight below the floor: one more step.
    low = {sim.id: {I.PROCESSED: 2, I.ASSIGNED: 1}}
    assert await target(produced, [sim], low, **pace) == {
        sim.id: Operation(feeder_args={"target_events": 60, "events_per_seed": 10})
    }
    # Not caught up yet (the feeder still has seeds to issue): wait.
    behind = member("sim", args={"target_events": 60, "events_per_seed": 10})
    assert await target(produced, [behind], {behind.id: {I.PROCESSED: 3}}, **pace) == {}
    # Undershoot: seeds ended Problematic, so the next step counts from what was produced and
    # stays within the target.
    lost = {behind.id: {I.PROCESSED: 7, I.PROBLEMATIC: 2}}
    assert await target(produced, [behind], lost, **pace) == {
        behind.id: Operation(feeder_args={"target_events": 120, "events_per_seed": 10})
    }
    # Reached: disabled.
    done = {behind.id: {I.PROCESSED: 10}}
    assert await target(produced, [behind], done, **pace) == {
        behind.id: Operation(feeder_enabled=False)
    }


async def test_a_seeds_member_is_held_back_by_its_downstream_chain(
    produced: MemoryExecution,
) -> None:
    sim = member("sim", args={"target_events": 30, "events_per_seed": 10})
    reco = member("reco", feeder="Edge", args={}, upstream=(sim,))
    merge = member("merge", feeder="Edge", args={}, upstream=(reco,))
    aside = member("aside", feeder="Query", args={})  # not downstream of sim
    pace = {"target_events": 100, "step_events": 30, "chain_backlog": 5}
    caught_up = {sim.id: {I.PROCESSED: 3}, reco.id: {I.UNASSIGNED: 3}, aside.id: {I.ASSIGNED: 9}}
    raised = {sim.id: Operation(feeder_args={"target_events": 60, "events_per_seed": 10})}
    # Three inputs in flight in the chain (aside's nine are not its): raised.
    assert await target(produced, [sim, reco, merge, aside], caught_up, **pace) == raised
    # A member two edges downstream is Paused: held at the step it has.
    paused = member(
        "merge", feeder="Edge", args={}, upstream=(reco,), status=TransformationStatus.PAUSED
    )
    assert await target(produced, [sim, reco, paused, aside], caught_up, **pace) == {}
    # A paused member that does not read from sim holds nothing back.
    idle = member("aside", feeder="Query", args={}, status=TransformationStatus.PAUSED)
    assert await target(produced, [sim, reco, merge, idle], caught_up, **pace) == raised
    # The chain's backlog above the bound, though sim itself has nothing in flight: held.
    piled = {**caught_up, merge.id: {I.FAILED: 1, I.ASSIGNED: 2}}
    assert await target(produced, [sim, reco, merge, aside], piled, **pace) == {}
    # Held back or not, a member whose events are produced is disabled.
    done = {**piled, sim.id: {I.PROCESSED: 10}}
    assert await target(produced, [sim, reco, paused], done, **pace) == {
        sim.id: Operation(feeder_enabled=False)
    }


async def test_no_target_no_operation(produced: MemoryExecution) -> None:
    sim = member("sim")
    assert await target(produced, [sim], {sim.id: {I.PROCESSED: 100}}) == {}


# -- PeriodicFlush --------------------------------------------------------------------------------


def flush(transformation: Transformation, overview: dict[InputStatus, int], **args: Any) -> Any:
    return periodic_flush(
        transformation=transformation,
        input_overview=overview,
        args=FlushArgs(**args),
        settings=SETTINGS,
    )


def test_periodic_flush_when_due_and_inputs_wait() -> None:
    never = member("merge")
    assert flush(never, {I.UNASSIGNED: 3}) == Operation(flush=True)
    assert flush(never, {I.PROCESSED: 3}) is None  # nothing waits
    assert flush(never, {I.UNASSIGNED: 3}, flush_every_s=None) is None
    recent = datetime.now(UTC) - timedelta(minutes=5)
    fresh = member("merge", annotations={"flushed_at": recent.isoformat()})
    assert flush(fresh, {I.UNASSIGNED: 3}, flush_every_s=3600) is None
    assert flush(fresh, {I.UNASSIGNED: 3}, flush_every_s=60) == Operation(flush=True)


def test_periodic_flush_pauses_past_the_failure_threshold() -> None:
    merge = member("merge")
    failing = {I.PROCESSED: 8, I.PROBLEMATIC: 2, I.UNASSIGNED: 5}
    assert flush(merge, failing) == Operation(pause=True, remember={PAUSED_ON_FAILURES: True})
    assert flush(merge, failing, pause_on_failures=False) == Operation(flush=True)
    assert flush(merge, {I.PROCESSED: 1, I.PROBLEMATIC: 2}) is None  # sample too small


def test_periodic_flush_judges_a_fresh_window_after_an_operator_resumes() -> None:
    failing = {I.PROCESSED: 8, I.PROBLEMATIC: 2}
    # It paused the member; an operator resumed it: the failures it saw do not pause it again,
    # and the window starts from the counts of its first round after the resume.
    resumed = member("merge", annotations={HOOK_MEMORY: {PAUSED_ON_FAILURES: True}})
    window = {WINDOW: {"processed": 8, "problematic": 2}}
    assert flush(resumed, failing) == Operation(remember=window)
    assert flush(resumed, {**failing, I.UNASSIGNED: 1}) == Operation(flush=True, remember=window)
    # In the window: ten successes pass; then three failures in the next ten settled pause it.
    judged = member("merge", annotations={HOOK_MEMORY: window})
    assert flush(judged, {I.PROCESSED: 8 + 10, I.PROBLEMATIC: 2}) is None
    assert flush(judged, {I.PROCESSED: 8 + 7, I.PROBLEMATIC: 2 + 3}) == Operation(
        pause=True, remember={PAUSED_ON_FAILURES: True}
    )
    # The quarantined inputs written off since leave the counts: the window never goes negative.
    assert flush(judged, {I.PROCESSED: 8 + 10}) is None
    # Without the window, the same overview would pause at once.
    assert flush(member("merge"), failing) == Operation(
        pause=True, remember={PAUSED_ON_FAILURES: True}
    )


# -- through the registry --------------------------------------------------------------------------


async def test_hooks_run_through_the_registry_with_injection(produced: MemoryExecution) -> None:
    providers = Providers()
    providers.add(ExecutionView, produced)
    registry = Registry.discover(providers=providers)
    sim = member("sim")
    result = await registry.call(
        "ScoutingToApproving",
        "ScoutUntilSettled",
        {"min_sample": 1},
        phase="scouting",
        workgraph=workgraph(),
        transformations=[sim],
        input_overviews={sim.id: {I.PROCESSED: 3}},
    )
    assert accepted(result)
    # A hook that raises is a plugin failure naming it.
    with pytest.raises(PluginFailed, match="ScoutUntilSettled"):
        await registry.call(
            "ScoutingToApproving",
            "ScoutUntilSettled",
            {"stages": [{"ghost": {}}]},
            phase="scouting",
            workgraph=workgraph(),
            transformations=[sim],
            input_overviews={sim.id: {I.PROCESSED: 3}},
        )
    document = {"output": "out", "files": 1, "step": "sim", "step_output": "out"}
    await register(produced, sim, "out", 1)
    operations = await registry.call(
        "WorkgraphActive",
        "OutputTarget",
        {},
        phase="active",
        workgraph=workgraph(document),
        transformations=[sim],
        input_overviews={},
    )
    assert operations == {sim.id: Operation(feeder_enabled=False)}


async def test_an_extended_scout_is_not_settled_before_its_sample_is_issued() -> None:
    """Found by the end-to-end scouting scenario: after ExtendScout raised scouting_events, the
    hook judged the old sample settled before the feeder had issued the new seeds."""
    sim = member("sim", args={**SEEDS, "scouting_events": 60})  # 6 seeds of 10 events
    assert await scout([sim], {sim.id: {I.PROCESSED: 4}}) != Accept()
    assert accepted(await scout([sim], {sim.id: {I.PROCESSED: 6}}))


async def test_extend_scout_grows_a_sample_without_stages_and_a_query_fraction() -> None:
    """ExtendScout without arguments grows the scout whatever feeds it: a Seeds member's own
    first sample again per round, a Query member's scouting fraction likewise (up to every
    file); the first sample is remembered on the member so that later rounds count from it."""
    sim = member("sim", args={**SEEDS, "scouting_events": 30})
    query = member("strip", feeder="Query", args={"scouting_fraction": 0.25})
    runs = member("spruce", feeder="Query", args={"scouting_runs": [7]})
    settled = {sim.id: {I.PROCESSED: 3}, query.id: {I.PROCESSED: 2}, runs.id: {I.PROCESSED: 1}}
    assert accepted(await scout([sim, query, runs], settled))  # round 0: as given
    grown = await scout([sim, query, runs], settled, scout_round=1)
    assert grown == {
        sim.id: Operation(
            feeder_args={**SEEDS, "scouting_events": 60},
            feeder_enabled=True,
            remember={"scout_base": 30},
        ),
        query.id: Operation(
            feeder_args={"scouting_fraction": 0.5},
            feeder_enabled=True,
            remember={"scout_base": 0.25},
        ),
    }  # named runs cannot grow: they are kept
    # Round 3 counts from the remembered first sample; the fraction stops at every file.
    sim3 = member(
        "sim",
        args={**SEEDS, "scouting_events": 60},
        annotations={HOOK_MEMORY: {"scout_base": 30}},
    )
    query3 = member(
        "strip",
        feeder="Query",
        args={"scouting_fraction": 0.5},
        annotations={HOOK_MEMORY: {"scout_base": 0.25}},
    )
    third = await scout([sim3, query3], {}, scout_round=3)
    assert third[sim3.id].feeder_args == {**SEEDS, "scouting_events": 120}
    assert third[query3.id].feeder_args == {"scouting_fraction": 1.0}
