"""The built-in lifecycle hooks: ScoutUntilSettled, OutputTarget and PeriodicFlush.

* `ScoutUntilSettled` (ScoutingToApproving): accepts once every member running in the scout has
  settled its sample, or at once when the failure threshold is crossed (so that CheckSuccessRate
  fails and the trouble shows as ApprovingBlocked); with `stages`, it climbs a ladder of feeder
  arguments first, one rung per settled sample; with `event_stages`, it sets the Seeds members'
  sample itself, one stage per scout round (the workgraph's `scout_round`, which ExtendScout
  without arguments advances). A member with no input yet, or a Seeds member that has not
  issued its sample (its feeder off, say), keeps the workgraph scouting. While a member's only
  live inputs wait to be packed it asks for a flush, since a grouping packer holds back an
  undersized sample.
* `OutputTarget` (the workgraph's Active hook): the document's file target (`target` of
  dirac:Workgraph, which the engine resolves to the producing step and output) disables every
  external feeder once the output holds that many files; an event target raises each Seeds
  feeder in steps while the events in flight are below a floor and disables it once the events
  produced reach the target, raising it again on undershoot. It holds a Seeds member back (no
  raise) while a member downstream of it is Paused or its chain — it and every member
  downstream — holds more than `chain_backlog` inputs in flight.
* `PeriodicFlush` (a transformation's Active hook): flushes the packer every `flush_every_s`
  while inputs wait, and pauses the member when its failure rate crosses the threshold; once an
  operator resumes it, the rate is judged afresh from then on.

All three are stateless: what they need to remember is in the rows they are shown (feeder
arguments, the engine's `flushed_at` annotation, PeriodicFlush's `Operation.remember`), so any
replica can run the next sweep.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from pydantic import Field, model_validator

from dxts.core.builtins.feeders import IN_FLIGHT, BuiltinSettings
from dxts.core.builtins.thresholds import Fates, SuccessRateSettings, ThresholdArgs, fates
from dxts.core.plugins import (
    Accept,
    InputOverview,
    Operation,
    PluginArgs,
    Transformation,
    Workgraph,
    hook,
)
from dxts.core.plugins.proposals import HOOK_MEMORY
from dxts.core.plugins.protocols.lifecycle import ExecutionView, needed
from dxts.core.states import InputStatus, TransformationStatus

I = InputStatus  # noqa: E741 - the state table's name
EDGE_FEEDER = "Edge"
SEEDS_FEEDER = "Seeds"
# What the engine records on a transformation when it applies a flush (the last one's time).
FLUSHED_AT = "flushed_at"
# The document's target as the engine shows it in the workgraph's annotations.
TARGET = "target"
# The workgraph's scout round as ExtendScout records it in its annotations (0 when absent).
SCOUT_ROUND = "scout_round"
SCOUTING_EVENTS = "scouting_events"
SCOUTING_FRACTION = "scouting_fraction"
# The catalogue feeders whose scout is a fraction of their selection.
QUERY_FEEDERS = frozenset({"Query", "LHCbAncestors"})
# What ScoutUntilSettled remembers of a member (Operation.remember): its first scout sample.
SCOUT_BASE = "scout_base"
# What PeriodicFlush remembers (Operation.remember): that it paused the member on failures, then
# the counts the window after the operator's resume starts from.
PAUSED_ON_FAILURES = "paused_on_failures"
WINDOW = "failure_window"


def member_name(transformation: Transformation) -> str:
    return str(transformation.annotations.get("id") or transformation.id)


# -- ScoutingToApproving -------------------------------------------------------------------------


class ScoutArgs(ThresholdArgs):
    stages: list[dict[str, dict[str, Any]]] = Field(
        default_factory=list,
        description="the ladder: per rung, member name → feeder arguments merged over its own",
    )
    event_stages: list[int] = Field(
        default_factory=list,
        description="the Seeds members' sample in events, one stage per scout round (ascending)",
    )
    flush_when_idle: bool = Field(
        True, description="flush a member whose only live inputs wait to be packed"
    )

    @model_validator(mode="after")
    def _ascending(self) -> ScoutArgs:
        events = self.event_stages
        if any(n < 1 for n in events) or any(a >= b for a, b in itertools.pairwise(events)):
            raise ValueError("event_stages must be positive and ascending")
        return self


def _settled(transformation: Transformation, overview: InputOverview) -> bool:
    """No input of the member is still work, and it has had its sample: a member with no input
    yet is waited for whether its feeder is on or off (an empty sample settles nothing)."""
    if any(overview.get(status, 0) for status in IN_FLIGHT):
        return False
    return sum(overview.values()) > 0 and _sample_issued(transformation, overview)


def _sample_issued(transformation: Transformation, overview: InputOverview) -> bool:
    """A Seeds member has issued the scout's sample: a scout extended by new arguments is not
    settled on the inputs of the smaller sample before the feeder has issued the rest, and one
    without a sample yet (the ladder sets it) has issued nothing."""
    if transformation.feeder != SEEDS_FEEDER:
        return True
    args = transformation.feeder_args
    per_seed, asked = args.get("events_per_seed"), args.get(SCOUTING_EVENTS)
    if not per_seed:
        return True
    if not asked:
        return False
    return sum(overview.values()) * int(per_seed) >= int(asked)


def _idle(overview: InputOverview) -> bool:
    return overview.get(I.UNASSIGNED, 0) > 0 and not (
        overview.get(I.ASSIGNED, 0) or overview.get(I.FAILED, 0)
    )


def _contains(args: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
    return all(key in args and args[key] == value for key, value in patch.items())


def _rung(stages: list[dict[str, dict[str, Any]]], members: Mapping[str, Transformation]) -> int:
    """The highest rung whose arguments every member it names already has (-1: none)."""
    for index in range(len(stages) - 1, -1, -1):
        if all(
            name in members and _contains(members[name].feeder_args, patch)
            for name, patch in stages[index].items()
        ):
            return index
    return -1


def scout_round(annotations: Mapping[str, Any]) -> int:
    """A workgraph's scout round, from its annotations: 0 for the first scout, +1 per
    ExtendScout without arguments."""
    value = annotations.get(SCOUT_ROUND, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def stage_events(stages: list[int], round_: int) -> int:
    """The sample of a scout round on a ladder of event stages: the round's stage, and past the
    last one more step per round (the last step: the last stage less the one before it)."""
    if round_ < len(stages):
        return stages[round_]
    step = stages[-1] - stages[-2] if len(stages) > 1 else stages[-1]
    return stages[-1] + (round_ - len(stages) + 1) * step


def _grown(
    member: Transformation, key: str, current: float, wanted: float, *, base: bool
) -> Operation | None:
    """Raise `key` of a member's feeder arguments to `wanted` (None: it is there already),
    remembering the first sample (`base`) when the growth is counted from it."""
    if current >= wanted:
        return None
    memory = None
    if base:
        memory = {**_memory(member), SCOUT_BASE: _memory(member).get(SCOUT_BASE) or current}
    return Operation(
        feeder_args={**member.feeder_args, key: wanted}, feeder_enabled=True, remember=memory
    )


def _event_stage(
    running: list[Transformation],
    args: ScoutArgs,
    workgraph: Workgraph,
    fraction: float,
) -> dict[UUID, Operation]:
    """Each running member's sample for the workgraph's scout round (ExtendScout without
    arguments advances it), where it is below it (a sample is a floor: a larger one an operator
    gave is kept). A Seeds member takes the round's event stage, one more step per round past
    the last; without event stages, its own first sample again per round (round r: r + 1 times
    it). A Query-fed member's scouting fraction grows the same way (up to every file); one
    scouting named runs keeps them. The first sample is remembered (`scout_base`) when a round
    first grows it. A Seeds member with no sample and no event stages is an error."""
    round_ = scout_round(workgraph.annotations)
    seeds = [t for t in running if t.feeder == SEEDS_FEEDER]
    bare = [member_name(t) for t in seeds if not t.feeder_args.get(SCOUTING_EVENTS)]
    if bare and not args.event_stages:
        raise ValueError(
            f"{', '.join(bare)}: no scout sample (give the Seeds feeder scouting_events or "
            "this hook event_stages)"
        )
    operations: dict[UUID, Operation] = {}
    for member in running:
        memory, feeder = _memory(member), member.feeder_args
        operation = None
        if member.feeder == SEEDS_FEEDER:
            events = int(feeder.get(SCOUTING_EVENTS) or 0)
            if args.event_stages:
                wanted = stage_events(args.event_stages, round_)
            else:
                wanted = int(memory.get(SCOUT_BASE) or events) * (round_ + 1)
            staged = bool(args.event_stages)
            operation = _grown(member, SCOUTING_EVENTS, events, wanted, base=not staged)
        elif member.feeder in QUERY_FEEDERS and round_ and not feeder.get("scouting_runs"):
            share = float(feeder.get(SCOUTING_FRACTION) or fraction)
            grown = min(1.0, float(memory.get(SCOUT_BASE) or share) * (round_ + 1))
            operation = _grown(member, SCOUTING_FRACTION, share, grown, base=True)
        if operation is not None:
            operations[member.id] = operation
    return operations


async def _fed_all_produced(
    execution: ExecutionView | None, transformation: Transformation
) -> bool:
    """An Edge member holds every file its producer has made so far under the output it reads,
    each as an input that has settled (none of them still in flight).

    Without this, a consumer whose inputs are all processed looks settled in the moment between
    its producer recording a file and its feeder feeding it, and the scout would be judged on a
    sample that has not gone through the whole chain. The input must have settled, not merely
    be there: the overviews `_settled` judged were read before this listing, so an input fed in
    between is in neither, and accepting then would judge the scout without it and leave it
    Unassigned behind a grouping packer, which only this hook flushes while the producer's
    feeder is on (until the sign-off, and after it until the producer has drained)."""
    output = transformation.feeder_args.get("transformation_output_id")
    if transformation.feeder != EDGE_FEEDER or output is None:
        return True
    execution = needed(execution, "ExecutionView")
    fed = {
        item.lfn
        async for item in execution.inputs(transformation.id)
        if item.lfn and item.status not in IN_FLIGHT
    }
    async for produced in execution.outputs_of(UUID(str(output))):
        if produced.lfn not in fed:
            return False
    return True


def early(seen: Fates) -> str:
    """The log's words for a scout accepted at once because it is failing."""
    return f"early, the failure threshold is crossed: {seen.describe()}"


def settled(seen: Fates) -> str:
    """The log's words for a scout accepted once its sample settled."""
    return f"the sample settled: {seen.describe()}"


@hook("ScoutingToApproving")
async def scout_until_settled(
    *,
    workgraph: Workgraph,
    transformations: list[Transformation],
    input_overviews: dict[UUID, InputOverview],
    args: ScoutArgs,
    settings: SuccessRateSettings,
    execution: ExecutionView | None = None,
    builtins: BuiltinSettings | None = None,
) -> Accept | dict[UUID, Operation]:
    """Accept a settled (or plainly failing) scout; otherwise set the round's sample, climb the
    ladder or flush. A member is settled when none of its inputs is still work, it has had its
    sample and, fed by an Edge, it holds every file its producer has made."""
    running = [t for t in transformations if t.status == TransformationStatus.ACTIVE]
    overviews = {t.id: input_overviews.get(t.id, {}) for t in running}
    seen = fates(overviews.values())
    if seen.failing(args.threshold(settings)):
        return Accept(early(seen))
    fraction = (builtins or BuiltinSettings()).scouting_fraction
    sampled = _event_stage(running, args, workgraph, fraction)
    if sampled:
        return sampled
    if not all(_settled(t, overviews[t.id]) for t in running):
        if not args.flush_when_idle:
            return {}
        return {t.id: Operation(flush=True) for t in running if _idle(overviews[t.id])}
    for member in running:
        if not await _fed_all_produced(execution, member):
            return {}
    by_name = {member_name(t): t for t in transformations}
    following = _rung(args.stages, by_name) + 1
    if following >= len(args.stages):
        return Accept(settled(seen))
    unknown = sorted(set(args.stages[following]) - set(by_name))
    if unknown:
        raise ValueError(f"stage {following + 1} names no member called {', '.join(unknown)}")
    return {
        by_name[name].id: Operation(
            feeder_args={**by_name[name].feeder_args, **patch}, feeder_enabled=True
        )
        for name, patch in args.stages[following].items()
    }


# -- the workgraph's Active hook ------------------------------------------------------------------


class TargetArgs(PluginArgs):
    output: str | None = Field(
        None, pattern=r"^[^/]+/[^/]+$", description="'step/output' (default: the document's target)"
    )
    files: int | None = Field(None, ge=1, description="files in it that end the workgraph")
    target_events: int | None = Field(None, ge=1, description="events the Seeds feeders produce")
    step_events: int | None = Field(
        None, ge=1, description="events asked for at a time (default: all that remain)"
    )
    floor_events: int | None = Field(
        None, ge=0, description="raise when fewer events are in flight (default: half a step)"
    )
    chain_backlog: int = Field(
        10_000,
        ge=0,
        description="inputs in flight in a Seeds member and those downstream of it above which "
        "it is not raised",
    )

    @model_validator(mode="after")
    def _both_or_neither(self) -> TargetArgs:
        if (self.output is None) != (self.files is None):
            raise ValueError("output and files go together")
        return self


async def _files_in(
    execution: ExecutionView, producer: Transformation, output: str, enough: int
) -> int:
    """Files the producer's parcels produced under the output (its ParcelOutputs: the catalogue
    registers files without saying which output produced them), counted up to `enough`."""
    count = 0
    async for record in execution.outputs(producer.id):
        if record.name == output:
            count += 1
            if count >= enough:
                break
    return count


def _file_target(workgraph: Workgraph, args: TargetArgs) -> tuple[str, str, int] | None:
    """(step, output, files) from the args, else from the document's target."""
    if args.output is not None and args.files is not None:
        step, output = args.output.split("/")
        return step, output, args.files
    target = workgraph.annotations.get(TARGET)
    if not isinstance(target, dict) or not isinstance(target.get("files"), int):
        return None
    if not (isinstance(target.get("step"), str) and isinstance(target.get("step_output"), str)):
        return None
    return target["step"], target["step_output"], target["files"]


def downstream(
    member: Transformation, transformations: list[Transformation]
) -> list[Transformation]:
    """The members that read from `member`, directly or through others (the workgraph's edges
    as each member's `upstream_ids`: its Edge feeder's producer, the members it is `after`)."""
    readers: dict[UUID, list[Transformation]] = defaultdict(list)
    for t in transformations:
        for upstream_id in t.upstream_ids:
            readers[upstream_id].append(t)
    found: dict[UUID, Transformation] = {}
    frontier = [member.id]
    while frontier:
        for reader in readers.get(frontier.pop(), []):
            if reader.id != member.id and reader.id not in found:
                found[reader.id] = reader
                frontier.append(reader.id)
    return list(found.values())


def held_back(
    member: Transformation,
    transformations: list[Transformation],
    input_overviews: Mapping[UUID, InputOverview],
    chain_backlog: int,
) -> bool:
    """Whether a Seeds member must not be raised: a member downstream of it is Paused (what it
    would be asked for would only pile up there), or its chain (it and every member downstream)
    holds more than `chain_backlog` inputs in flight."""
    chain = downstream(member, transformations)
    if any(t.status == TransformationStatus.PAUSED for t in chain):
        return True
    backlog = sum(
        input_overviews.get(t.id, {}).get(status, 0)
        for t in (member, *chain)
        for status in IN_FLIGHT
    )
    return backlog > chain_backlog


def _raise_seeds(
    member: Transformation, overview: InputOverview, args: TargetArgs, *, held: bool
) -> Operation | None:
    """Disable a Seeds feeder whose events are produced; raise one that has issued what it was
    asked for while too little is in flight, keeping what is asked within the target, unless
    it is `held` back (`held_back`)."""
    assert args.target_events is not None
    feeder = member.feeder_args
    per_seed, asked = feeder.get("events_per_seed"), feeder.get("target_events")
    if not (isinstance(per_seed, int) and isinstance(asked, int)):
        raise ValueError(f"{member_name(member)}: Seeds arguments without events_per_seed")
    produced = overview.get(I.PROCESSED, 0) * per_seed
    if produced >= args.target_events:
        return Operation(feeder_enabled=False)
    in_flight = sum(overview.get(s, 0) for s in IN_FLIGHT) * per_seed
    step = args.step_events or args.target_events
    floor = step // 2 if args.floor_events is None else args.floor_events
    issued = sum(overview.values())
    if held or issued < math.ceil(asked / per_seed) or in_flight >= floor:
        return None
    # The feeder's cursor is at the seeds issued; events asked for that ended Problematic never
    # come, so the next step counts from what was produced and what is in flight.
    more = min(step, args.target_events - produced - in_flight)
    raised = issued * per_seed + more
    if more <= 0 or raised <= asked:
        return None
    return Operation(feeder_args={**feeder, "target_events": raised})


@hook("WorkgraphActive")
async def output_target(
    *,
    workgraph: Workgraph,
    transformations: list[Transformation],
    input_overviews: dict[UUID, InputOverview],
    args: TargetArgs,
    execution: ExecutionView | None = None,
) -> dict[UUID, Operation]:
    """The file target ends the workgraph's external feeders; the event target paces Seeds."""
    enabled = [t for t in transformations if t.feeder_enabled and t.feeder is not None]
    target = _file_target(workgraph, args)
    if target is not None:
        step, output, files = target
        producer = next((t for t in transformations if member_name(t) == step), None)
        if producer is None:
            raise ValueError(f"the target's step {step!r} is no member of the workgraph")
        if await _files_in(needed(execution, "ExecutionView"), producer, output, files) >= files:
            return {
                t.id: Operation(feeder_enabled=False) for t in enabled if t.feeder != EDGE_FEEDER
            }
    if args.target_events is None:
        return {}
    operations = {}
    for member in enabled:
        if member.feeder == SEEDS_FEEDER and member.status == TransformationStatus.ACTIVE:
            held = held_back(member, transformations, input_overviews, args.chain_backlog)
            operation = _raise_seeds(member, input_overviews.get(member.id, {}), args, held=held)
            if operation is not None:
                operations[member.id] = operation
    return operations


# -- a transformation's Active hook -------------------------------------------------------------


class FlushArgs(ThresholdArgs):
    flush_every_s: float | None = Field(
        3600.0, gt=0, description="flush this often while inputs wait (None: never)"
    )
    pause_on_failures: bool = Field(True, description="pause once the failure rate is crossed")


def _flushed_at(transformation: Transformation) -> datetime | None:
    text = transformation.annotations.get(FLUSHED_AT)
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _memory(transformation: Transformation) -> dict[str, Any]:
    memory = transformation.annotations.get(HOOK_MEMORY)
    return memory if isinstance(memory, dict) else {}


def _since(seen: Fates, window: Any) -> Fates:
    """The fates settled since the window began (its start's counts in `window`); an input
    written off or reset since then leaves the count, never below zero."""
    if not isinstance(window, dict):
        return seen
    processed = seen.processed - int(window.get("processed", 0))
    problematic = seen.problematic - int(window.get("problematic", 0))
    return Fates(max(0, processed), max(0, problematic), seen.live)


@hook("TransformationActive")
def periodic_flush(
    *,
    transformation: Transformation,
    input_overview: InputOverview,
    args: FlushArgs,
    settings: SuccessRateSettings,
) -> Operation | None:
    """Pause past the failure threshold; otherwise flush when due and inputs wait.

    The rate is judged over a window: from the start, and after the hook paused the member and
    an operator resumed it, from the first round it runs again (it remembers that it paused),
    so that the failures that made it pause do not pause it again at once."""
    remember = None
    if args.pause_on_failures:
        seen = fates([input_overview])
        memory = _memory(transformation)
        if memory.get(PAUSED_ON_FAILURES):
            remember = {WINDOW: {"processed": seen.processed, "problematic": seen.problematic}}
        elif _since(seen, memory.get(WINDOW)).failing(args.threshold(settings)):
            return Operation(pause=True, remember={PAUSED_ON_FAILURES: True})
    if args.flush_every_s is None or not input_overview.get(I.UNASSIGNED, 0):
        return None if remember is None else Operation(remember=remember)
    last = _flushed_at(transformation)
    due = last is None or (datetime.now(UTC) - last).total_seconds() >= args.flush_every_s
    if not due and remember is None:
        return None
    return Operation(flush=due, remember=remember)
