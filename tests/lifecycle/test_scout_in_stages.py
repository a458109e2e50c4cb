"""ScoutInStages: the Seeds members' sample climbs its stages, each judged settled and good
before the next; the last settled accepts, failing results accept at once, saying so."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from lifecycle_doubles import MemoryExecution
from pydantic import ValidationError
from test_builtin_hooks import SETTINGS, member

from dxts.core.builtins.stages import StagesArgs, scout_in_stages
from dxts.core.plugins import Accept, Operation, Transformation, Workgraph
from dxts.core.states import InputStatus, WorkgraphStatus

I = InputStatus  # noqa: E741
STAGES = [20, 50, 100]  # events; the Seeds members make 10 events a seed


def seeds(sample: int | None) -> dict[str, Any]:
    args: dict[str, Any] = {"target_events": 1000, "events_per_seed": 10}
    if sample is not None:
        args["scouting_events"] = sample
    return args


async def stage(
    members: list[Transformation], overviews: dict[uuid.UUID, dict[InputStatus, int]]
) -> Any:
    return await scout_in_stages(
        workgraph=Workgraph(uuid.uuid4(), "Test", WorkgraphStatus.SCOUTING),
        transformations=members,
        input_overviews=overviews,
        args=StagesArgs(stages=STAGES, min_sample=4),
        settings=SETTINGS,
        execution=MemoryExecution(),
    )


def raised(result: Any, to: int) -> bool:
    return isinstance(result, dict) and all(
        op == Operation(feeder_args=seeds(to), feeder_enabled=True) for op in result.values()
    )


async def test_the_sample_climbs_three_stages_then_the_scout_is_accepted() -> None:
    sim = member("sim", args=seeds(None))
    # No sample yet: the first stage is set.
    first = await stage([sim], {sim.id: {}})
    assert set(first) == {sim.id} and raised(first, 20)
    # The first stage (2 seeds) still running: wait; settled: the second stage.
    at_20 = member("sim", args=seeds(20))
    assert await stage([at_20], {at_20.id: {I.PROCESSED: 1, I.ASSIGNED: 1}}) == {}
    assert raised(await stage([at_20], {at_20.id: {I.PROCESSED: 2}}), 50)
    # Raised but not issued yet (2 of 5 seeds): not settled on the smaller sample.
    at_50 = member("sim", args=seeds(50))
    assert await stage([at_50], {at_50.id: {I.PROCESSED: 2}}) == {}
    assert raised(await stage([at_50], {at_50.id: {I.PROCESSED: 5}}), 100)
    at_100 = member("sim", args=seeds(100))
    assert await stage([at_100], {at_100.id: {I.PROCESSED: 10}}) == Accept(
        "stage 3 of 3 (100 events) settled: 100.0% of 10 settled inputs succeeded (0 Problematic)"
    )


async def test_results_crossing_the_threshold_accept_at_once_saying_so() -> None:
    at_50 = member("sim", args=seeds(50))
    result = await stage([at_50], {at_50.id: {I.PROCESSED: 2, I.PROBLEMATIC: 2, I.ASSIGNED: 1}})
    assert result == Accept(
        "early, the failure threshold is crossed: 50.0% of 4 settled inputs succeeded "
        "(2 Problematic)"
    )


async def test_a_workgraph_without_seeds_members_and_stages_out_of_order_are_refused() -> None:
    query = member("strip", feeder="Query", args={})
    with pytest.raises(ValueError, match=r"no running member \(strip\) is fed by Seeds"):
        await stage([query], {query.id: {}})
    with pytest.raises(ValidationError, match="stages must be positive and ascending"):
        StagesArgs(stages=[50, 20])
