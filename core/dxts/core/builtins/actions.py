"""The built-in actions (docs/extensions.md): checks record Passed, housekeeping Done.

Approving (the workgraph's list): `CheckSuccessRate`, `EstimateResourceUsage`, `ManualApproval`.
Finalizing: `NoInputProcessedTwice`, `ReconcileFeederInputs`, `CheckOutputFiles`,
`EveryInputSettled`, `OnlyUnprocessedRemain`. Archiving and Cleaning: `CleanIntermediates` /
`RemoveIntermediateFiles`, `RemoveOutputFiles`, `CancelInFlightParcels`, `CleanDatabaseEntries`
(last in both lists).

Pending means "not yet knowable, run me again later" (parcels still cancelling, rows still being
deleted); a sign-off nobody has given is Failed, and the person gives it by forcing the action.
Every action is idempotent: the runner may run one again after a crash between its effect and
the recording of its result.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any, Literal, cast
from uuid import UUID, uuid4

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.builtins.lifecycle_hooks import member_name
from dxts.core.builtins.thresholds import SuccessRateSettings, ThresholdArgs, fates, listed
from dxts.core.catalogue import FileCatalogue
from dxts.core.ids import canonical_json, input_hash
from dxts.core.plugins import (
    ActionResult,
    Input,
    InputOverview,
    NoMoreInputs,
    Phase,
    PluginArgs,
    Point,
    SetFeederState,
    Transformation,
    action,
)
from dxts.core.plugins.protocols.lifecycle import (
    IN_FLIGHT_PARCELS,
    LIVE_PARCELS,
    SUCCEEDED_PARCELS,
    CleanMode,
    Counts,
    ExecutionControl,
    ExecutionView,
    OutputRecord,
    Siblings,
    needed,
)
from dxts.core.plugins.registry import Registry
from dxts.core.states import InputStatus, Kind, TransformationStatus

I = InputStatus  # noqa: E741 - the state table's name
EDGE_FEEDER = "Edge"
# The Parcels.Annotations key under which a parcel's measured usage is recorded (execution
# writes it from the backend's Outcome.usage): {"cpu_hours": float, "memory_gb": float,
# "wall_hours": float}, per parcel, each only when measured. cpu_hours is user + system time of
# all its processes; memory_gb the peak resident memory of its largest process, in GB of 10^9
# bytes.
USAGE = "usage"
CATALOGUE_BATCH = 1000  # LFNs per catalogue call
# The measures an estimate derives, as the usage annotation and a requirements template name them.
MEASURES = ("cpu_hours", "memory_gb", "wall_hours")


async def _batches(
    items: AsyncIterator[str], size: int = CATALOGUE_BATCH
) -> AsyncIterator[list[str]]:
    batch: list[str] = []
    async for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# -- Approving -----------------------------------------------------------------------------------


class SuccessArgs(ThresholdArgs):
    min_passed: int | None = Field(None, ge=1, description="Processed inputs needed to pass")


@action("Approving")
def check_success_rate(
    *,
    transformations: list[Transformation],
    input_overviews: dict[UUID, InputOverview],
    args: SuccessArgs,
    settings: SuccessRateSettings,
) -> ActionResult:
    """Judge the scout by input fate: Problematic over settled, with a minimum sample."""
    fate = fates(input_overviews.get(t.id, {}) for t in transformations)
    threshold = args.threshold(settings)
    if not fate.judged(threshold):
        if fate.live:
            return ActionResult.pending(f"{fate.describe()}; {fate.live} still in flight")
        return ActionResult.failed(
            f"{fate.describe()}: the sample is below the minimum of {threshold.min_sample}; "
            "extend the scout"
        )
    if fate.failing(threshold):
        return ActionResult.failed(
            f"{fate.describe()}, below the minimum of {threshold.min_success_rate:.1%}"
        )
    if args.min_passed is not None and fate.processed < args.min_passed:
        return ActionResult.failed(
            f"{fate.processed} inputs processed, {args.min_passed} needed; extend the scout"
        )
    return ActionResult.passed(fate.describe())


class EstimateSettings(BaseSettings):
    """The installation's caps on an estimated template (`DXTS_ESTIMATE_*`): an estimate never
    asks for more than the installation offers."""

    model_config = SettingsConfigDict(env_prefix="DXTS_ESTIMATE_", extra="ignore")

    max_cpu_hours: float | None = Field(None, gt=0, description="cap on cpu_hours")
    max_memory_gb: float | None = Field(None, gt=0, description="cap on memory_gb")
    max_wall_hours: float | None = Field(None, gt=0, description="cap on wall_hours")

    def cap(self, key: str) -> float | None:
        return cast(float | None, getattr(self, f"max_{key}"))


Percentile = Annotated[float, Field(gt=0, le=100)]
Measure = Literal["cpu_hours", "memory_gb", "wall_hours"]


class EstimateArgs(PluginArgs):
    max_cpu_hours: float | None = Field(None, gt=0, description="per parcel")
    max_memory_gb: float | None = Field(
        None, gt=0, description="per parcel (its largest process), in GB of 10^9 bytes"
    )
    margin: float = Field(1.2, ge=1, description="the safety factor over the percentile measured")
    cpu_percentile: Percentile = Field(95, description="of the scouts' cpu_hours")
    memory_percentile: Percentile = Field(75, description="of the scouts' memory_gb")
    wall_percentile: Percentile = Field(95, description="of the scouts' wall_hours")
    downstream_scale: dict[Measure, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="per measure, the factor by which a compute member without measurements of "
        "its own inherits the estimate of the nearest estimated member upstream through Edge "
        "feeders (a measure not named is not inherited)",
    )

    def percentile(self, key: str) -> float:
        return {
            "cpu_hours": self.cpu_percentile,
            "memory_gb": self.memory_percentile,
            "wall_hours": self.wall_percentile,
        }[key]


def percentile(values: list[float], rank: float) -> float:
    """The nearest-rank percentile: the smallest measurement at least `rank`% of them reach."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(rank / 100 * len(ordered)) - 1)]


async def _measured(
    execution: ExecutionView, transformation: Transformation
) -> dict[str, list[float]]:
    """Each measure every successful scout parcel of the member reported, by measure."""
    measured: dict[str, list[float]] = {}
    async for parcel in execution.parcels(transformation.id, SUCCEEDED_PARCELS):
        usage = parcel.annotations.get(USAGE)
        if not isinstance(usage, dict):
            continue
        for key in MEASURES:
            value = usage.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                measured.setdefault(key, []).append(float(value))
    return measured


def _rounded_up(value: float) -> float:
    return math.ceil(round(value * 10, 9)) / 10


def _capped(key: str, value: float, how: dict[str, Any], settings: EstimateSettings) -> float:
    """`value` within the installation's cap on `key`; `how` records the cap when it applied."""
    cap = settings.cap(key)
    if cap is not None and value > cap:
        how["capped_at"] = cap
        return cap
    return value


def _estimate(
    measured: dict[str, list[float]], args: EstimateArgs, settings: EstimateSettings
) -> tuple[dict[str, float], dict[str, Any]]:
    """The template (each measure's percentile times the margin, rounded up to a tenth, within
    the installation's cap) and how each value was derived."""
    template: dict[str, float] = {}
    derived: dict[str, Any] = {}
    for key, values in measured.items():
        rank = args.percentile(key)
        how: dict[str, Any] = {
            "percentile": rank,
            "parcels": len(values),
            "measured": percentile(values, rank),
            "margin": args.margin,
        }
        value = _rounded_up(percentile(values, rank) * args.margin)
        template[key], derived[key] = _capped(key, value, how, settings), how
    return template, derived


def _estimated_upstream(
    member: Transformation, members: dict[UUID, Transformation], estimated: set[UUID]
) -> UUID | None:
    """The nearest member up `member`'s chain of Edge producers that has an estimate of its own
    (an Edge has one producer, so the chain is a line; it may pass through data members)."""
    seen = {member.id}
    producer = member.producer_id
    while producer is not None and producer not in seen and producer in members:
        if producer in estimated:
            return producer
        seen.add(producer)
        producer = members[producer].producer_id
    return None


def _inherited(
    estimate: dict[str, float], source: str, args: EstimateArgs, settings: EstimateSettings
) -> tuple[dict[str, float], dict[str, Any]]:
    """The template a downstream member inherits: each measure `downstream_scale` names that
    `source`'s estimate has, times its factor, rounded up to a tenth, within the cap."""
    template: dict[str, float] = {}
    derived: dict[str, Any] = {}
    for key, scale in args.downstream_scale.items():
        if key not in estimate:
            continue
        how: dict[str, Any] = {"inherited_from": source, "estimate": estimate[key], "scale": scale}
        value = _rounded_up(estimate[key] * scale)
        template[key], derived[key] = _capped(key, value, how, settings), how
    return template, derived


def _provenance(name: str, derived: dict[str, Any], template: dict[str, float]) -> str:
    parts = []
    for key, how in derived.items():
        if "inherited_from" in how:
            source = f"{how['inherited_from']}'s {how['estimate']:g} x {how['scale']:g}"
        else:
            source = f"p{how['percentile']:g} of {how['parcels']} parcels x {how['margin']:g}"
        capped = " (capped)" if "capped_at" in how else ""
        parts.append(f"{key} {template[key]:g} ({source}){capped}")
    return f"{name}: {', '.join(parts)}"


@action("Approving")
async def estimate_resource_usage(
    *,
    transformations: list[Transformation],
    args: EstimateArgs,
    settings: EstimateSettings,
    execution: ExecutionView | None = None,
) -> ActionResult:
    """Fail when a member's scout parcels needed more than allowed; otherwise write into each
    compute member's requirements template a percentile of what its scouts measured, times the
    margin, rounded up to a tenth and within the installation's caps, and record from how many
    parcels. A compute member with no measurements of its own, fed through Edges by an
    estimated member, inherits that estimate scaled by `downstream_scale` (when given)."""
    limits = {"cpu_hours": args.max_cpu_hours, "memory_gb": args.max_memory_gb}
    names = {t.id: member_name(t) for t in transformations}
    updated: dict[UUID, dict[str, Any]] = {}
    derivations: dict[UUID, dict[str, Any]] = {}
    too_much = []
    compute = [t for t in transformations if t.kind == Kind.COMPUTE]
    for member in compute:
        measured = await _measured(needed(execution, "ExecutionView"), member)
        for key, limit in limits.items():
            peak = max(measured.get(key, ()), default=None)
            if limit is not None and peak is not None and peak > limit:
                too_much.append(
                    f"{names[member.id]} used {peak:g} {key} per parcel (at most {limit:g})"
                )
        if measured:
            updated[member.id], derivations[member.id] = _estimate(measured, args, settings)
    if too_much:
        return ActionResult.failed(listed(too_much))
    if args.downstream_scale:
        members, estimated = {t.id: t for t in transformations}, set(updated)
        for member in (t for t in compute if t.id not in estimated):
            source = _estimated_upstream(member, members, estimated)
            if source is None:
                continue
            template, derived = _inherited(updated[source], names[source], args, settings)
            if template:
                updated[member.id], derivations[member.id] = template, derived
    if not updated:
        if any(limit is not None for limit in limits.values()):
            return ActionResult.failed(
                "no scout parcel reported its usage, so the limits cannot be checked"
            )
        return ActionResult.passed("no scout parcel reported its usage: templates unchanged")
    return ActionResult.passed(
        "; ".join(_provenance(names[t], derivations[t], updated[t]) for t in updated),
        updated_requirements=updated,
        derivations=derivations,
    )


class SignOffArgs(PluginArgs):
    role: str | None = Field(None, min_length=1, description="who signs off")


@action("Approving")
def manual_approval(*, args: SignOffArgs) -> ActionResult:
    """A person's sign-off: Failed until it is given, which is forcing this action to Passed."""
    who = f"someone with the {args.role} role" if args.role else "an operator"
    return ActionResult.failed(f"awaiting the sign-off of {who}: force this action to pass")


# -- Finalizing ----------------------------------------------------------------------------------


@action("Finalizing")
async def no_input_processed_twice(
    *, transformation: Transformation, execution: ExecutionView | None = None
) -> ActionResult:
    """Every input succeeded in at most one parcel (the property that makes inputs, not
    parcels, the retryable thing)."""
    seen: Counter[UUID] = Counter()
    async for _, input_id in needed(execution, "ExecutionView").successes(transformation.id):
        seen[input_id] += 1
    twice = [f"{input_id} ({n} parcels)" for input_id, n in seen.items() if n > 1]
    if twice:
        return ActionResult.failed(f"{len(twice)} input(s) processed twice: {listed(twice)}")
    return ActionResult.passed(f"each of {len(seen)} processed inputs by one parcel")


def _describe(item: Input) -> str:
    lfn = getattr(item, "lfn", None)
    return str(lfn) if lfn else canonical_json(item.descriptor).decode()


async def _replay_feeder(registry: Registry, transformation: Transformation) -> dict[bytes, Input]:
    """Every input the feeder yields from no bookmark on, by input hash, in order.

    A feeder may stop after a batch (Seeds' `batch`) and go on from its bookmark when invoked
    again, so it is invoked again from the bookmark it yielded until it says NoMoreInputs, its
    bookmark stands still, or an invocation yields nothing it had not yielded before (a feeder
    that starts a new pass over the same selection)."""
    yielded: dict[bytes, Input] = {}
    state: dict[str, Any] = {}
    while True:
        started, fresh, exhausted = state, False, False
        stream = cast(
            AsyncGenerator[Any, None],
            registry.stream(
                Point.FEEDER,
                needed(transformation.feeder, "a feeder"),
                transformation.feeder_args,
                phase=Phase.ACTIVE,
                transformation=transformation,
                feeder_state=dict(state),
            ),
        )
        async with contextlib.aclosing(stream) as items:
            async for item in items:
                if isinstance(item, NoMoreInputs):
                    exhausted = True
                    break
                if isinstance(item, SetFeederState):
                    state = dict(item.state)
                elif isinstance(item, Input) and item.input_hash not in yielded:
                    yielded[item.input_hash] = item
                    fresh = True
        if exhausted or not fresh or state == started:
            return yielded


@action("Finalizing")
async def reconcile_feeder_inputs(
    *,
    transformation: Transformation,
    registry: Registry | None = None,
    execution: ExecutionView | None = None,
) -> ActionResult:
    """Re-run the feeder once without its bookmark (an Edge: compare the producer's files by LFN)
    and fail listing what it yields that the transformation does not hold. Never repairs:
    recovering a miss is an operator's work."""
    feeder = transformation.feeder
    if feeder is None:
        return ActionResult.passed("no feeder to reconcile")
    execution = needed(execution, "ExecutionView")
    missing: list[str] = []
    if feeder == EDGE_FEEDER:
        output = UUID(str(transformation.feeder_args["transformation_output_id"]))
        fed = {i.lfn async for i in execution.inputs(transformation.id) if i.lfn}
        async for produced in execution.outputs_of(output):
            if produced.lfn not in fed:
                fed.add(produced.lfn)
                missing.append(produced.lfn)
        checked = len(fed)
    else:
        held = {input_hash(i.lfn, i.descriptor) async for i in execution.inputs(transformation.id)}
        yielded = await _replay_feeder(needed(registry, "the plugin Registry"), transformation)
        checked = len(yielded)
        missing = [_describe(item) for key, item in yielded.items() if key not in held]
    if missing:
        return ActionResult.failed(
            f"{len(missing)} of {checked} inputs the feeder yields are missing: {listed(missing)}"
        )
    return ActionResult.passed(f"all {checked} inputs the feeder yields are present")


@action("Finalizing")
async def check_output_files(
    *,
    transformation: Transformation,
    catalogue: FileCatalogue,
    execution: ExecutionView | None = None,
) -> ActionResult:
    """Every file the transformation's parcels produced is in the catalogue with a replica."""
    outputs = needed(execution, "ExecutionView").outputs(transformation.id)

    async def lfns() -> AsyncIterator[str]:
        async for output in outputs:
            yield output.lfn

    problems: list[str] = []
    checked = 0
    async for batch in _batches(lfns()):
        checked += len(batch)
        found = await catalogue.files(batch)
        for lfn in batch:
            if lfn not in found:
                problems.append(f"{lfn} is not in the catalogue")
            elif not found[lfn].replicas:
                problems.append(f"{lfn} has no replica")
    if problems:
        return ActionResult.failed(f"{len(problems)} of {checked} output files: {listed(problems)}")
    return ActionResult.passed(f"all {checked} output files are catalogued with a replica")


@action("Finalizing")
def every_input_settled(*, input_overview: InputOverview) -> ActionResult:
    """Every input ended Processed, Split or NotProcessed (none in quarantine or in flight)."""
    open_inputs = {
        status: n
        for status, n in input_overview.items()
        if n and status not in (I.PROCESSED, I.SPLIT, I.NOT_PROCESSED)
    }
    if open_inputs:
        shown = ", ".join(f"{n} {status}" for status, n in sorted(open_inputs.items()))
        return ActionResult.failed(f"inputs not settled: {shown}")
    return ActionResult.passed(f"all {sum(input_overview.values())} inputs settled")


class ConsumerArgs(PluginArgs):
    consumer: str = Field(min_length=1, description="the member that consumes the files")


async def _processed_lfns(execution: ExecutionView, transformation_id: UUID) -> set[str]:
    return {i.lfn async for i in execution.inputs(transformation_id, [I.PROCESSED]) if i.lfn}


@action("Finalizing")
async def only_unprocessed_remain(
    *,
    transformation: Transformation,
    args: ConsumerArgs,
    execution: ExecutionView | None = None,
    siblings: Siblings | None = None,
) -> ActionResult:
    """A removal after a consumer: it removed exactly the files the consumer processed, so the
    files left in place are the ones the consumer did not (kept for whoever investigates)."""
    execution = needed(execution, "ExecutionView")
    if transformation.workgraph_id is None:
        return ActionResult.failed("a standalone transformation has no consumer to compare with")
    members = await needed(siblings, "Siblings").members(transformation.workgraph_id)
    consumer = members.get(args.consumer)
    if consumer is None:
        return ActionResult.failed(f"the workgraph has no member called {args.consumer}")
    consumed = await _processed_lfns(execution, consumer.id)
    removed = await _processed_lfns(execution, transformation.id)
    kept = sorted(consumed - removed)
    lost = sorted(removed - consumed)
    problems = [f"{lfn} was processed by {args.consumer} and is still there" for lfn in kept]
    problems += [f"{lfn} was removed though {args.consumer} did not process it" for lfn in lost]
    if problems:
        return ActionResult.failed(listed(problems))
    return ActionResult.passed(
        f"the {len(removed)} files {args.consumer} processed were removed, no other"
    )


# -- Archiving and Cleaning ------------------------------------------------------------------------


async def _remove(
    execution: ExecutionView,
    catalogue: FileCatalogue,
    transformation: Transformation,
    intermediate: bool,
) -> ActionResult:
    async def lfns() -> AsyncIterator[str]:
        output: OutputRecord
        async for output in execution.outputs(transformation.id):
            if output.intermediate == intermediate:
                yield output.lfn

    removed = listed_files = 0
    async for batch in _batches(lfns()):
        listed_files += len(batch)
        removed += await catalogue.remove_files(batch)
    what = "intermediate" if intermediate else "output"
    return ActionResult.done(f"{removed} of {listed_files} {what} files removed from the catalogue")


@action("Archiving", "Cleaning")
async def remove_intermediate_files(
    *,
    transformation: Transformation,
    catalogue: FileCatalogue,
    execution: ExecutionView | None = None,
) -> ActionResult:
    """Forget the files of the outputs no workflow output declares (CleanIntermediates when
    archiving, RemoveIntermediateFiles when cleaning)."""
    return await _remove(
        needed(execution, "ExecutionView"), catalogue, transformation, intermediate=True
    )


@action("Cleaning")
async def remove_output_files(
    *,
    transformation: Transformation,
    catalogue: FileCatalogue,
    execution: ExecutionView | None = None,
) -> ActionResult:
    """A cancelled transformation's declared outputs are removed as well."""
    return await _remove(
        needed(execution, "ExecutionView"), catalogue, transformation, intermediate=False
    )


@action("Cleaning")
async def cancel_in_flight_parcels(
    *,
    transformation: Transformation,
    input_overview: InputOverview,
    counts: Counts | None = None,
    control: ExecutionControl | None = None,
) -> ActionResult:
    """Ask execution to cancel the parcels in flight and write off the inputs waiting; Pending
    until every parcel is terminal and no input waits."""
    control = needed(control, "ExecutionControl")
    found = await needed(counts, "Counts").parcels([transformation.id])
    parcels = found.get(transformation.id, {})
    reason = "transformation cancelled"
    if sum(parcels.get(status, 0) for status in IN_FLIGHT_PARCELS):
        await control.cancel_in_flight(transformation.id, request_id=str(uuid4()), reason=reason)
    waiting = sum(input_overview.get(s, 0) for s in (I.UNASSIGNED, I.FAILED, I.PROBLEMATIC))
    if waiting:
        await control.write_off_waiting(transformation.id, request_id=str(uuid4()), reason=reason)
    live = sum(parcels.get(status, 0) for status in LIVE_PARCELS)
    if live or waiting:
        return ActionResult.pending(f"{live} parcel(s) not terminal, {waiting} input(s) waiting")
    return ActionResult.done("every parcel is terminal")


class CleanArgs(PluginArgs):
    calls: int = Field(20, ge=1, description="batches deleted per run before reporting Pending")


@action("Archiving", "Cleaning")
async def clean_database_entries(
    *,
    transformation: Transformation,
    args: CleanArgs,
    control: ExecutionControl | None = None,
) -> ActionResult:
    """Delete the transformation's bulk rows through execution (archiving keeps the outputs the
    catalogue points at); the transformation row, its actions and its log remain."""
    mode = (
        CleanMode.ARCHIVE
        if transformation.status == TransformationStatus.ARCHIVING
        else CleanMode.CLEAN
    )
    control = needed(control, "ExecutionControl")
    deleted = 0
    for _ in range(args.calls):
        step = await control.clean_transformation(transformation.id, mode, request_id=str(uuid4()))
        deleted += step.rows_deleted
        if step.complete:
            return ActionResult.done(f"{deleted} rows deleted ({mode})")
    return ActionResult.pending(f"{deleted} rows deleted so far ({mode})")
