"""ScoutInStages: a scout run at increasing event counts, each stage judged before the next
(docs/extensions.md, "Scouting in stages").

A ScoutingToApproving hook. The Seeds members' sample (`scouting_events`) is set to the first
stage; once every running member has settled that sample and its results are good (the
failure threshold CheckSuccessRate judges is not crossed), the sample is raised to the next
stage — the feeder issues the difference — and so on; once the last stage has settled good, the
scout is accepted and the workgraph moves to Approving, where the sign-off (ManualApproval, say)
is given. Results that cross the threshold at any stage accept at once, saying so, so that
CheckSuccessRate fails and the trouble shows as ApprovingBlocked rather than as a scout that
never ends.

Unlike ScoutUntilSettled's `event_stages`, which an operator advances one round at a time
(ExtendScout), the climb here is the hook's own: its position is the members' sample, which is
in their feeder arguments, so the hook keeps no state and any replica runs the next round.
"""

from __future__ import annotations

import itertools
from uuid import UUID

from pydantic import Field, field_validator

from dxts.core.builtins.lifecycle_hooks import (
    SCOUTING_EVENTS,
    SEEDS_FEEDER,
    _fed_all_produced,
    _idle,
    _settled,
    early,
    member_name,
)
from dxts.core.builtins.thresholds import SuccessRateSettings, ThresholdArgs, fates
from dxts.core.plugins import Accept, InputOverview, Operation, Transformation, Workgraph, hook
from dxts.core.plugins.protocols.lifecycle import ExecutionView
from dxts.core.states import TransformationStatus


class StagesArgs(ThresholdArgs):
    stages: list[int] = Field(
        min_length=1, description="the Seeds members' sample in events at each stage (ascending)"
    )
    flush_when_idle: bool = Field(
        True, description="flush a member whose only live inputs wait to be packed"
    )

    @field_validator("stages")
    @classmethod
    def _ascending(cls, stages: list[int]) -> list[int]:
        if any(n < 1 for n in stages) or any(a >= b for a, b in itertools.pairwise(stages)):
            raise ValueError("stages must be positive and ascending")
        return stages


def _sample(member: Transformation) -> int:
    return int(member.feeder_args.get(SCOUTING_EVENTS) or 0)


def stage_of(seeds: list[Transformation], stages: list[int]) -> int:
    """The stage every Seeds member has reached (its sample at least the stage's), -1: none."""
    reached = min(_sample(member) for member in seeds)
    return max((index for index, events in enumerate(stages) if reached >= events), default=-1)


def _raise_to(seeds: list[Transformation], events: int) -> dict[UUID, Operation]:
    return {
        member.id: Operation(
            feeder_args={**member.feeder_args, SCOUTING_EVENTS: events}, feeder_enabled=True
        )
        for member in seeds
        if _sample(member) < events
    }


@hook("ScoutingToApproving")
async def scout_in_stages(
    *,
    workgraph: Workgraph,
    transformations: list[Transformation],
    input_overviews: dict[UUID, InputOverview],
    args: StagesArgs,
    settings: SuccessRateSettings,
    execution: ExecutionView | None = None,
) -> Accept | dict[UUID, Operation]:
    """Set the first stage; raise to the next once the stage has settled with good results;
    accept after the last, or at once when the results cross the failure threshold."""
    running = [t for t in transformations if t.status == TransformationStatus.ACTIVE]
    seeds = [t for t in running if t.feeder == SEEDS_FEEDER]
    if not seeds:
        names = ", ".join(member_name(t) for t in running) or "none"
        raise ValueError(
            f"ScoutInStages sets the samples of Seeds members; no running member ({names}) is "
            "fed by Seeds"
        )
    overviews = {t.id: input_overviews.get(t.id, {}) for t in running}
    seen = fates(overviews.values())
    if seen.failing(args.threshold(settings)):
        return Accept(early(seen))
    stage = stage_of(seeds, args.stages)
    if stage < 0:
        return _raise_to(seeds, args.stages[0])
    if not all(_settled(t, overviews[t.id]) for t in running):
        if not args.flush_when_idle:
            return {}
        return {t.id: Operation(flush=True) for t in running if _idle(overviews[t.id])}
    for member in running:
        if not await _fed_all_produced(execution, member):
            return {}
    if stage + 1 < len(args.stages):
        return _raise_to(seeds, args.stages[stage + 1])
    return Accept(
        f"stage {stage + 1} of {len(args.stages)} ({args.stages[stage]} events) settled: "
        f"{seen.describe()}"
    )
