"""Outcome recording (DISPATCH.md): from a backend's answer to terminal parcels and inputs.

Two steps, each in transactions of a batch of parcels, two of them side by side on a server
(`RECORD_LANES`: the server writes one while this process prepares the other):

* `record_outcomes` — what the dispatcher forwards (RecordOutcomes). A finished parcel goes
  Assigned → Completing with the outcome stored on it (`Annotations.outcome`) and, when the
  backend measured it, its resource usage (`Annotations.usage`, in the units the approving
  action EstimateResourceUsage reads: cpu_hours, wall_hours, memory_gb); a failed one
  Assigned → Failed with its inputs Failed (ErrorCount + 1). A parcel Completing with a cancel
  request takes its confirmation: CANCELLED → Cancelled with its inputs NotProcessed, a failure →
  Failed, a success is stored for recording like any other. Idempotent: an outcome for a parcel
  already past that point is acknowledged as ALREADY_RECORDED and changes nothing; an unknown
  parcel is acknowledged as UNKNOWN_PARCEL, logged, and changes nothing.
* `record_completing` — the Completing sweep: outputs registered with the file catalogue and
  written as ParcelOutputs, the status report applied to each input (splits included), the parcel
  Done, PartiallyDone or Failed. Re-entrant: everything but the catalogue registration (itself
  idempotent) commits in the one transaction that takes the parcel out of Completing, so a batch
  interrupted anywhere simply runs again.

Decisions DISPATCH.md leaves to this project, besides its step 4:

* A backend that cancels an Assigned parcel nobody asked it to cancel has failed it: Failed,
  inputs Failed (there is no Assigned → Cancelled edge, and the inputs deserve a retry).
* An outcome for a parcel still Unassigned or Reserved is not recorded (UNKNOWN_PARCEL with the
  reason): it cannot have run; the adaptor reports it again once the parcel is Assigned.
* An outcome from a backend other than the parcel's is not recorded either (UNKNOWN_PARCEL).
* A file the catalogue refuses (its LFN registered with other content), or that cannot be
  registered at all, fails the parcel with the reason: its outputs cannot be recorded.
* Split children inherit their parent's failure history: a FAILURE portion starts at the
  parent's ErrorCount + 1 (it failed in this parcel), a SUCCESS portion at the parent's count. A
  child whose identity the transformation already has is not inserted again (warning).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from sqlalchemy import exc
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.builtins.actions import USAGE
from dxts.core.catalogue import CatalogueFile, FileCatalogue
from dxts.core.db import Database, Isolation, db_now, mysql_error_code
from dxts.core.errors import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
)
from dxts.core.ids import id_from_str, id_to_str, new_id, new_ids
from dxts.core.plugins import FileInput, Input
from dxts.core.state_machines import Actor
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.execution import status_reports
from dxts.execution.db import outcomes as db
from dxts.execution.db.common import move_inputs
from dxts.execution.db.outcomes import CarriedInput, ParcelMove, ParcelRow
from dxts.execution.definition_client import ActiveTransformations
from dxts.execution.metrics import OUTCOMES, PARCELS_RECORDED
from dxts.execution.status_reports import STATUS_REPORT_OUTPUT, Action, Entry
from dxts.v1 import common_pb2

log = logging.getLogger(__name__)

T = TypeVar("T")

RC = Isolation.READ_COMMITTED
CORE = Actor.CORE
I, P = InputStatus, ParcelStatus  # noqa: E741 - the state tables' names

# Keys execution writes in Parcels.Annotations. CANCEL_REQUESTED is the dispatcher's agreed key
# (dxts.dispatcher.db.CANCEL_REQUESTED): a Completing parcel carrying it waits for the backend.
OUTCOME = db.OUTCOME
CANCEL_REQUESTED = "cancel_requested"
CANCEL_REASON = "cancel_reason"
WARNINGS = "warnings"
REASON = "reason"
RECOVERY_PARCEL = "recovery_parcel_id"
RECOVERY_OF = "recovery_of"
RECOVERY_BACKEND = "recovery"
REASON_LENGTH = 1_000  # characters of an unplanned error kept as a failed parcel's reason

MAX_WARNINGS = 20  # kept per parcel; the rest are counted
RECORD_BATCH = 500  # parcels per recording transaction
RECORD_LANES = 2  # recording transactions at a time
LANE_PARCELS = 200  # the fewest parcels worth a transaction of their own alongside another
SPLIT_RACE_ATTEMPTS = 3  # a batch's runs when a concurrent batch took a split child's identity
MYSQL_DUPLICATE_KEY = 1062
PAGE = 1_000  # Completing parcels read per page while looking for recordable ones

RECORDED = common_pb2.OUTCOME_DISPOSITION_RECORDED
ALREADY = common_pb2.OUTCOME_DISPOSITION_ALREADY_RECORDED
UNKNOWN = common_pb2.OUTCOME_DISPOSITION_UNKNOWN_PARCEL
SUCCEEDED = common_pb2.OUTCOME_RESULT_SUCCEEDED
CANCELLED = common_pb2.OUTCOME_RESULT_CANCELLED


# -- the outcome as stored ----------------------------------------------------------------------


_FILE_FIELDS = ("output_name", "lfn", "size", "checksum", "storage_element")
_TEXT_FIELDS = ("backend", "identifier", "backend_status", "message", "status_report_json")
_RESULT_NAMES = frozenset(common_pb2.OutcomeResult.keys())
UsageField = Literal["cpu_seconds", "wall_seconds", "max_memory_bytes"]
_USAGE_FIELDS: tuple[UsageField, ...] = ("cpu_seconds", "wall_seconds", "max_memory_bytes")
SECONDS_PER_HOUR = 3600
# The usage annotation's memory is in GB of 10^9 bytes (decimal, not GiB): `memory_gb`, like
# EstimateResourceUsage's `max_memory_gb`, is the peak of the parcel's largest process.
BYTES_PER_GB = 10**9


def usage_to_json(usage: common_pb2.ResourceUsage) -> dict[str, float | int]:
    """The measures the backend reported, by field name: an unreported one is absent, and so is
    one no measurement can give (negative, NaN or infinite, which JSON cannot even store)."""
    measures: dict[str, float | int] = {}
    for name in _USAGE_FIELDS:
        if usage.HasField(name):
            value = getattr(usage, name)
            if 0 <= value < math.inf:
                measures[name] = value
    return measures


# Outcome.usage field → (Annotations.usage key, divisor into its unit).
_USAGE_UNITS = {
    "cpu_seconds": ("cpu_hours", SECONDS_PER_HOUR),
    "wall_seconds": ("wall_hours", SECONDS_PER_HOUR),
    "max_memory_bytes": ("memory_gb", BYTES_PER_GB),
}


def usage_annotation(measures: Mapping[str, float | int] | None) -> dict[str, float] | None:
    """`Annotations.usage` of the parcel (`dxts.core.builtins.actions.USAGE`) from the stored
    outcome's measures (`usage_to_json`): cpu_hours, wall_hours, memory_gb (10^9 bytes), each
    only when reported; None when nothing was."""
    if not measures:
        return None
    return {
        _USAGE_UNITS[name][0]: value / _USAGE_UNITS[name][1] for name, value in measures.items()
    }


def outcome_to_json(outcome: common_pb2.Outcome) -> dict[str, Any]:
    """The outcome as stored in `Annotations.outcome`: the message's fields by name, the result
    by its enum name, sizes as numbers (plain JSON, read back without protobuf's JSON mapping,
    which recording would otherwise pay for every parcel)."""
    stored: dict[str, Any] = {  # spelled out: this runs for every outcome forwarded
        "result": common_pb2.OutcomeResult.Name(outcome.result),
        "backend": outcome.backend,
        "identifier": outcome.identifier,
        "backend_status": outcome.backend_status,
        "message": outcome.message,
        "status_report_json": outcome.status_report_json,
        "outputs": [
            {
                "output_name": f.output_name,
                "lfn": f.lfn,
                "size": f.size,
                "checksum": f.checksum,
                "storage_element": f.storage_element,
            }
            for f in outcome.outputs
        ],
    }
    if outcome.HasField("finished_at"):
        stored["finished_at"] = outcome.finished_at.ToJsonString()
    if outcome.HasField("usage"):
        stored["usage"] = usage_to_json(outcome.usage)
    return stored


def stored_outcome(annotations: Mapping[str, Any] | None) -> common_pb2.Outcome | None:
    """The outcome recorded on a parcel (`Annotations.outcome`), or None (GetParcel uses it)."""
    stored = (annotations or {}).get(OUTCOME)
    if not isinstance(stored, dict):
        return None
    outcome = common_pb2.Outcome(
        outputs=[
            common_pb2.OutputFile(**{k: f[k] for k in _FILE_FIELDS if k in f})
            for f in stored.get("outputs", ())
        ]
    )
    if stored.get("result") in _RESULT_NAMES:
        outcome.result = common_pb2.OutcomeResult.Value(stored["result"])
    for name in _TEXT_FIELDS:
        setattr(outcome, name, str(stored.get(name) or ""))
    if stored.get("finished_at"):
        outcome.finished_at.FromJsonString(stored["finished_at"])
    usage = stored.get("usage")
    if isinstance(usage, dict):
        outcome.usage.SetInParent()  # reported, even if with no measure
        for name in _USAGE_FIELDS:
            value = usage.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                setattr(outcome.usage, name, int(value) if name == "max_memory_bytes" else value)
    return outcome


def _with(annotations: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    return {**annotations, **changes}


def _warned(annotations: Mapping[str, Any], warnings: Sequence[str]) -> dict[str, Any]:
    if not warnings:
        return dict(annotations)
    kept = [*annotations.get(WARNINGS, []), *warnings]
    if len(kept) > MAX_WARNINGS:
        kept = [*kept[: MAX_WARNINGS - 1], f"... and {len(kept) - MAX_WARNINGS + 1} more"]
    return _with(annotations, **{WARNINGS: kept})


# -- RecordOutcomes -----------------------------------------------------------------------------


def _ack(outcome: common_pb2.Outcome, disposition: int, message: str = "") -> common_pb2.OutcomeAck:
    return common_pb2.OutcomeAck(
        parcel_id=outcome.parcel_id,
        backend=outcome.backend,
        identifier=outcome.identifier,
        disposition=disposition,  # type: ignore[arg-type]
        message=message,
    )


async def record_outcomes(
    database: Database, outcomes: Sequence[common_pb2.Outcome]
) -> list[common_pb2.OutcomeAck]:
    """Take each outcome's parcel past Assigned; one ack per outcome, in order.

    One transaction, or two side by side over halves of the parcels for a large batch on a
    server (`RECORD_LANES`, at least `LANE_PARCELS` each): the server writes one half while
    this process prepares the other. An outcome is recorded once whichever half holds it, so
    a batch whose second half failed is simply forwarded again."""
    acks: list[common_pb2.OutcomeAck | None] = [None] * len(outcomes)
    by_parcel: dict[bytes, list[int]] = defaultdict(list)
    for index, outcome in enumerate(outcomes):
        try:
            parcel_id = id_from_str(outcome.parcel_id, field=f"outcomes[{index}].parcel_id")
        except InvalidArgument as error:
            acks[index] = _ack(outcome, UNKNOWN, str(error))
            log.warning("outcome for no parcel id from %s: %s", outcome.backend or "?", error)
            continue
        by_parcel[parcel_id].append(index)

    async def work(
        conn: AsyncConnection, parcel_ids: Sequence[bytes]
    ) -> dict[int, common_pb2.OutcomeAck]:
        now = await db_now(conn)
        rows = await db.lock_parcels(conn, parcel_ids)
        answers: dict[int, common_pb2.OutcomeAck] = {}
        moves: list[ParcelMove] = []
        inputs_failed: list[ParcelRow] = []
        inputs_written_off: list[ParcelRow] = []
        for parcel_id in parcel_ids:
            first, *repeats = by_parcel[parcel_id]
            outcome = outcomes[first]
            row = rows.get(parcel_id)
            for index in repeats:
                answers[index] = _ack(outcomes[index], ALREADY, "repeated in this batch")
            refused = _refusal(row, outcome)
            if refused is not None:
                answers[first] = refused
                continue
            assert row is not None
            move = _move_for(row, outcome)
            if move is None:
                answers[first] = _ack(outcome, ALREADY, f"parcel is {row.status}")
                continue
            moves.append(move)
            if move.target == P.FAILED:
                inputs_failed.append(row)
            elif move.target == P.CANCELLED:
                inputs_written_off.append(row)
            answers[first] = _ack(outcome, RECORDED, move.target)
        await db.move_parcels(conn, moves, now)
        await move_carried_inputs(conn, inputs_failed, I.FAILED, now, values=db.BUMP_ERRORS)
        await move_carried_inputs(conn, inputs_written_off, I.NOT_PROCESSED, now)
        return answers

    ids = sorted(by_parcel)
    lanes = 1 if database.is_sqlite else max(1, min(RECORD_LANES, len(ids) // LANE_PARCELS))
    size = -(-len(ids) // lanes)
    parts = [ids[start : start + size] for start in range(0, len(ids), size)]
    transactions = [
        functools.partial(database.run, functools.partial(work, parcel_ids=part), isolation=RC)
        for part in parts
    ]
    for answered in await side_by_side(transactions):
        for index, ack in answered.items():
            acks[index] = ack
    answers = [ack for ack in acks if ack is not None]
    for answer in answers:
        name = common_pb2.OutcomeDisposition.Name(answer.disposition)
        OUTCOMES.labels(name.removeprefix("OUTCOME_DISPOSITION_").lower()).inc()
        if answer.disposition == UNKNOWN:
            log.warning("outcome not recorded for %s: %s", answer.parcel_id, answer.message)
    return answers


async def side_by_side(calls: Sequence[Callable[[], Coroutine[Any, Any, T]]]) -> list[T]:
    """Run `calls` concurrently and return their results in order; the first failure cancels
    the others (a transaction rolls back whole) and is raised as itself."""
    if len(calls) <= 1:
        return [await call() for call in calls]
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call()) for call in calls]
    except* Exception as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


def _refusal(row: ParcelRow | None, outcome: common_pb2.Outcome) -> common_pb2.OutcomeAck | None:
    """Why the outcome cannot be this parcel's, as its ack; None when it can."""
    if row is None:
        return _ack(outcome, UNKNOWN, f"no parcel {outcome.parcel_id}")
    if row.backend and outcome.backend and row.backend != outcome.backend:
        return _ack(outcome, UNKNOWN, f"parcel runs on {row.backend}, not on {outcome.backend}")
    if row.status in (P.UNASSIGNED, P.RESERVED):
        return _ack(outcome, UNKNOWN, f"parcel is {row.status}: it has not been dispatched")
    return None


def _move_for(row: ParcelRow, outcome: common_pb2.Outcome) -> ParcelMove | None:
    """What the outcome does to the parcel; None when it was recorded before."""
    waiting = row.status == P.COMPLETING and OUTCOME not in row.annotations
    if row.status != P.ASSIGNED and not waiting:
        return None
    stored = outcome_to_json(outcome)
    annotations = _with(row.annotations, **{OUTCOME: stored})
    usage = usage_annotation(stored.get("usage"))
    if usage is not None:
        annotations[USAGE] = usage
    if outcome.result == SUCCEEDED:
        return ParcelMove(row, P.COMPLETING, annotations)
    if outcome.result == CANCELLED and waiting:
        return ParcelMove(row, P.CANCELLED, annotations, completed=True)
    why = outcome.message or common_pb2.OutcomeResult.Name(outcome.result)
    if outcome.result == CANCELLED:
        why = f"cancelled by the backend unasked: {why}"
    return ParcelMove(row, P.FAILED, _with(annotations, **{REASON: why}), completed=True)


async def move_carried_inputs(
    conn: AsyncConnection,
    rows: Sequence[ParcelRow],
    target: InputStatus,
    now: datetime,
    *,
    values: Mapping[str, Any] | None = None,
) -> None:
    """Move every input still Assigned to one of `rows` to `target`."""
    by_transformation: dict[bytes, list[bytes]] = defaultdict(list)
    for row in rows:
        if row.transformation_id is not None:
            by_transformation[row.transformation_id].append(row.parcel_id)
    for tid, parcel_ids in by_transformation.items():
        await db.move_held_inputs(conn, tid, parcel_ids, target=target, now=now, values=values)


# -- planning the record of one Completing parcel -------------------------------------------------


@dataclass
class Recording:
    """What recording a Completing parcel does, computed from its outcome and its inputs."""

    parcel: ParcelRow
    target: ParcelStatus
    carried: list[CarriedInput]  # the inputs still Assigned to it: those it decides
    fates: dict[InputStatus, list[CarriedInput]] = field(default_factory=dict)
    splits: list[tuple[CarriedInput, Entry]] = field(default_factory=list)
    # (TransformationOutputID, or None for a user parcel's file; the file)
    files: list[tuple[bytes | None, common_pb2.OutputFile]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reason: str | None = None

    def fail(self, reason: str) -> None:
        """The whole parcel fails: every input Failed, nothing registered."""
        self.target, self.reason = P.FAILED, reason
        self.fates = {I.FAILED: list(self.carried)}
        self.splits, self.files = [], []


def plan_recording(
    parcel: ParcelRow,
    outcome: common_pb2.Outcome,
    carried: Sequence[CarriedInput],
    outputs: Mapping[str, bytes] | None,
) -> Recording:
    """The record of a parcel whose backend finished it; `outputs` is the transformation's
    declared outputs (name → TransformationOutputID), None for a user parcel."""
    mine = list(carried)
    plan = Recording(parcel, P.DONE, mine)
    if outcome.result != SUCCEEDED:  # stored by an older recorder, or by hand: still a failure
        plan.fail(outcome.message or "the backend reported a failure")
        return plan
    declared = (
        outputs is not None and parcel.kind == Kind.COMPUTE and STATUS_REPORT_OUTPUT in outputs
    )
    entries: dict[bytes, Entry] = {}
    if declared:
        if not outcome.status_report_json:
            plan.fail("the process declares a status report but none arrived")
            return plan
        try:
            report = status_reports.parse(
                outcome.status_report_json, {_text_id(i.input_id): i.input_id for i in mine}
            )
        except status_reports.ReportRefused as error:
            plan.fail(f"the status report does not follow the schema: {error}")
            return plan
        if report.strangers:
            shown = ", ".join(repr(key[:40]) for key in report.strangers[:5])
            plan.warnings.append(
                f"the status report names {len(report.strangers)} input(s) this parcel did not "
                f"carry, ignored: {shown}"
            )
        entries = report.entries
    elif outcome.status_report_json:
        plan.warnings.append("a status report arrived but the process declares none: ignored")
    fates: dict[InputStatus, list[CarriedInput]] = defaultdict(list)
    some_success = False
    for item in mine:
        entry = entries.get(item.input_id) if declared else Entry(Action.SUCCESS)
        action = entry.action if entry is not None else Action.NOT_TRIED
        if entry is not None and action is Action.SPLIT:
            plan.splits.append((item, entry))
        else:
            fates[_FATE[action]].append(item)
        some_success = some_success or (entry is not None and entry.some_success)
    plan.fates = dict(fates)
    all_success = len(fates.get(I.PROCESSED, ())) == len(mine)
    plan.target = P.DONE if all_success else P.PARTIALLY_DONE if some_success else P.FAILED
    if plan.target != P.FAILED:
        plan.files = _declared_files(plan, outcome, outputs)
    return plan


def _text_id(value: bytes) -> str:
    """`ids.id_to_str` for ids read from the database (16 bytes by the column's type), without
    building a UUID: recording renders every input id of every report it reads."""
    h = value.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_FATE = {
    Action.SUCCESS: I.PROCESSED,
    Action.FAILURE: I.FAILED,
    Action.NOT_TRIED: I.UNASSIGNED,
}


def _declared_files(
    plan: Recording, outcome: common_pb2.Outcome, outputs: Mapping[str, bytes] | None
) -> list[tuple[bytes | None, common_pb2.OutputFile]]:
    files: list[tuple[bytes | None, common_pb2.OutputFile]] = []
    undeclared: set[str] = set()
    for file in outcome.outputs:
        if outputs is None:
            files.append((None, file))
        elif file.output_name in outputs:
            files.append((outputs[file.output_name], file))
        else:
            undeclared.add(file.output_name)
    if undeclared:
        names = ", ".join(repr(name[:64]) for name in sorted(undeclared))
        plan.warnings.append(f"outputs the process does not declare, not recorded: {names}")
        log.warning("parcel %s: undeclared outputs %s", id_to_str(plan.parcel.parcel_id), names)
    return files


# -- the Completing sweep -----------------------------------------------------------------------


class Recorder:
    """Records Completing parcels. The transformations' declared outputs are asked of the
    definition side (`describe`) once each: they never change once a transformation exists."""

    def __init__(
        self,
        database: Database,
        catalogue: FileCatalogue,
        transformations: ActiveTransformations,
    ) -> None:
        self.database = database
        self.catalogue = catalogue
        self.transformations = transformations
        self._outputs: dict[bytes, dict[str, bytes]] = {}

    async def record_completing(
        self, *, batch: int = RECORD_BATCH, lanes: int = RECORD_LANES
    ) -> int:
        """Record every Completing parcel whose outcome has arrived; returns how many.

        Batches run `lanes` at a time (one on SQLite, whose writers queue anyway), each in its
        own transaction over parcels no other batch has: the server works on one batch's
        writes while this process reads and plans the next, and the next page is read while
        they run. A batch that fails transiently (see `record`) cancels the others (each rolls
        back whole: recording is re-entrant) and its error is raised."""
        gate = asyncio.Semaphore(1 if self.database.is_sqlite else max(1, lanes))
        recorded, after = 0, None

        async def lane(parcel_ids: Sequence[bytes]) -> None:
            nonlocal recorded
            try:
                done = await self.record(parcel_ids)
                recorded += done  # after the await: both lanes add to the same total
            finally:
                gate.release()

        try:
            async with asyncio.TaskGroup() as group:
                while True:
                    page = await self.database.run(
                        functools.partial(db.recordable, after=after, limit=PAGE), isolation=RC
                    )
                    if not page:
                        break
                    after = page[-1][0]
                    # Asked before the transactions, which should not wait on another service.
                    known = await self._declared({tid for _, tid in page})
                    ready = [p for p, tid in page if tid is None or tid in known]
                    for start in range(0, len(ready), batch):
                        await gate.acquire()
                        group.create_task(lane(ready[start : start + batch]))
                    if len(page) < PAGE:
                        break
        except* Exception as failed:  # the first failure, as the sequential loop raised it
            raise failed.exceptions[0] from None
        return recorded

    async def record(self, parcel_ids: Sequence[bytes]) -> int:
        """Record these parcels if they are Completing with an outcome, in one transaction.

        A batch that fails for a reason other than the database or a service being away (a
        parcel whose outcome trips an error nobody planned for) is split in halves, each
        recorded on its own, down to the parcel at fault, which is failed with the error as
        its reason: one such parcel must not hold up every parcel after it in key order,
        sweep after sweep. Errors that say "later" (unreachable, deadlock, lock wait) are
        raised, for the next sweep to try again."""
        try:
            return await self._record_batch(parcel_ids)
        except Exception as error:
            if _transient(error):
                raise
            if len(parcel_ids) == 1:
                return await self._fail_unrecordable(parcel_ids[0], error)
            log.warning(
                "recording %d parcels failed (%s: %s): recording them in halves",
                len(parcel_ids),
                type(error).__name__,
                error,
            )
            half = len(parcel_ids) // 2
            return await self.record(parcel_ids[:half]) + await self.record(parcel_ids[half:])

    async def _fail_unrecordable(self, parcel_id: bytes, error: Exception) -> int:
        """Fail one Completing parcel whose recording raised `error`: Failed with the error as
        its reason, its inputs Failed (the failed-inputs hook decides on a retry), nothing
        registered. If even that fails (other than transiently, which is raised), the error
        is logged, the parcel stays Completing for an operator, and the sweep goes on."""
        reason = f"recording failed: {type(error).__name__}: {error}"[:REASON_LENGTH]
        log.error("parcel %s: %s", id_to_str(parcel_id), reason, exc_info=error)

        async def work(conn: AsyncConnection) -> list[str]:
            now = await db_now(conn)
            rows = [
                row
                for row in (await db.lock_parcels(conn, [parcel_id])).values()
                if row.status == P.COMPLETING
            ]
            carried = await db.carried_inputs(conn, rows)
            plans = [Recording(row, P.DONE, carried.get(row.parcel_id, [])) for row in rows]
            for plan in plans:
                plan.fail(reason)
            await _apply(conn, plans, now)
            return [plan.target for plan in plans]

        try:
            ended = await self.database.run(work, isolation=RC)
        except Exception as failed:
            if _transient(failed):
                raise
            log.exception(
                "parcel %s could not be failed either: left Completing", id_to_str(parcel_id)
            )
            return 0
        PARCELS_RECORDED.labels(P.FAILED).inc(len(ended))
        return len(ended)

    async def _record_batch(self, parcel_ids: Sequence[bytes]) -> int:
        """Record these parcels in one transaction.

        A batch recorded alongside another can lose the race for a split child's identity
        (both saw it free, the other inserted it first): the transaction fails on the unique
        key once the other commits, and runs again, now seeing the child as the sequential
        order would have (not inserted again, with a warning)."""
        for attempt in range(1, SPLIT_RACE_ATTEMPTS + 1):
            try:
                ended = await self.database.run(
                    functools.partial(self._record, parcel_ids=parcel_ids), isolation=RC
                )
                break
            except exc.IntegrityError as error:
                if mysql_error_code(error) != MYSQL_DUPLICATE_KEY or attempt == SPLIT_RACE_ATTEMPTS:
                    raise
                log.info("a split child was inserted by a batch recorded alongside: again")
        for status, count in Counter(ended).items():
            PARCELS_RECORDED.labels(status).inc(count)
        return len(ended)

    async def _record(self, conn: AsyncConnection, parcel_ids: Sequence[bytes]) -> list[str]:
        now = await db_now(conn)
        rows = [
            row
            for row in (await db.lock_parcels(conn, parcel_ids)).values()
            if row.status == P.COMPLETING and OUTCOME in row.annotations
        ]
        if not rows:
            return []
        carried = await db.carried_inputs(conn, rows)
        outputs = await self._declared({r.transformation_id for r in rows})
        plans = []
        for row in rows:
            if row.transformation_id is not None and row.transformation_id not in outputs:
                continue
            outcome = stored_outcome(row.annotations)
            assert outcome is not None
            declared = outputs[row.transformation_id] if row.transformation_id else None
            plans.append(plan_recording(row, outcome, carried.get(row.parcel_id, []), declared))
        await self._register(plans)
        await _apply(conn, plans, now)
        return [plan.target for plan in plans]

    async def _declared(
        self, transformation_ids: set[bytes | None]
    ) -> dict[bytes, dict[str, bytes]]:
        """The declared outputs of these transformations, by id; one the definition side does
        not know is left out (its parcels wait, with a warning, rather than hold up the rest)."""
        for tid in transformation_ids:
            if tid is not None and tid not in self._outputs:
                try:
                    described = await self.transformations.describe(tid, token=None)
                except NotFound:
                    log.warning("parcels of %s wait: definition knows no such", id_to_str(tid))
                    continue
                self._outputs[tid] = {o.name: o.output_id for o in described.outputs}
        return self._outputs

    async def _register(self, plans: Sequence[Recording]) -> None:
        """Register the files of the parcels that will be Done or PartiallyDone. A parcel whose
        files cannot be registered, or that the catalogue refuses (found by registering parcel
        by parcel), fails instead."""
        wanted: list[tuple[Recording, list[CatalogueFile]]] = []
        for plan in plans:
            if not plan.files:
                continue
            try:
                wanted.append((plan, _catalogue_files(plan)))
            except ValueError as error:
                _refused(plan, f"an output cannot be registered: {error}")
        if not wanted:
            return
        try:
            await self.catalogue.register([f for _, files in wanted for f in files])
            return
        except (FailedPrecondition, InvalidArgument):
            pass
        for plan, files in wanted:
            try:
                await self.catalogue.register(files)
            except (FailedPrecondition, InvalidArgument) as error:
                _refused(plan, f"the file catalogue refused its outputs: {error}")


def _transient(error: BaseException) -> bool:
    """An error that says "try later" rather than "this parcel cannot be recorded": the
    database or a service away, a deadlock that persisted, a lock wait that timed out."""
    if isinstance(error, Unavailable | Aborted | OSError | TimeoutError):
        return True
    return isinstance(error, exc.OperationalError | exc.InterfaceError) or (
        isinstance(error, exc.DBAPIError) and error.connection_invalidated
    )


def _refused(plan: Recording, reason: str) -> None:
    log.warning("parcel %s: %s", id_to_str(plan.parcel.parcel_id), reason)
    plan.fail(reason)


def _catalogue_files(plan: Recording) -> list[CatalogueFile]:
    """The plan's files as the catalogue registers them: LFN, size, checksum and the storage
    element written to; no metadata (which parcel and output produced a file is ParcelOutputs'
    to say, and an LFN must register alike whichever parcel re-produces it)."""
    return [
        CatalogueFile(
            lfn=file.lfn,
            size=file.size,
            checksum=file.checksum or None,
            replicas=(file.storage_element,) if file.storage_element else (),
        )
        for _, file in plan.files
    ]


async def _apply(conn: AsyncConnection, plans: Sequence[Recording], now: datetime) -> None:
    """Write every plan: outputs, input moves, split children and recovery parcels, the parcels'
    terminal moves, with their journals."""
    written = [
        (plan.parcel.parcel_id, output_id, file)
        for plan in plans
        for output_id, file in plan.files
        if output_id is not None
    ]
    outputs = [
        {
            "TransformationOutputID": output_id,
            "OutputID": output_row_id,
            "ParcelID": parcel_id,
            "LFN": file.lfn,
            "LFNSize": file.size,
        }
        for (parcel_id, output_id, file), output_row_id in zip(
            written, new_ids(len(written)), strict=True
        )
    ]
    await db.insert_parcel_outputs(conn, outputs)
    # A parcel whose inputs all meet one fate moves them by its id; the others input by input.
    whole: dict[tuple[bytes, InputStatus], list[bytes]] = defaultdict(list)
    loose: dict[tuple[bytes, InputStatus], list[bytes]] = defaultdict(list)
    for plan in plans:
        tid = plan.parcel.transformation_id
        if tid is None:
            continue
        if len(plan.fates) == 1 and not plan.splits:
            (fate,) = plan.fates
            whole[(tid, fate)].append(plan.parcel.parcel_id)
            continue
        for fate, items in plan.fates.items():
            loose[(tid, fate)].extend(item.input_id for item in items)
        loose[(tid, I.SPLIT)].extend(item.input_id for item, _ in plan.splits)
    for (tid, fate), parcel_ids in whole.items():
        values = db.BUMP_ERRORS if fate == I.FAILED else None
        await db.move_held_inputs(conn, tid, parcel_ids, target=fate, now=now, values=values)
    for (tid, fate), ids in loose.items():
        values = db.BUMP_ERRORS if fate == I.FAILED else None
        await move_inputs(
            conn, tid, ids, source=I.ASSIGNED, target=fate, actor=CORE, now=now, values=values
        )
    recovery = await _insert_splits(conn, [p for p in plans if p.splits], now)
    await db.move_parcels(
        conn,
        [
            ParcelMove(
                plan.parcel,
                plan.target,
                _terminal_annotations(plan, recovery.get(plan.parcel.parcel_id)),
                completed=True,
            )
            for plan in plans
        ],
        now,
    )


def _terminal_annotations(plan: Recording, recovery_id: bytes | None) -> dict[str, Any] | None:
    """The parcel's annotations after recording; None when nothing is added to them."""
    if not plan.warnings and plan.reason is None and recovery_id is None:
        return None
    annotations = _warned(plan.parcel.annotations, plan.warnings)
    if plan.reason is not None:
        annotations[REASON] = plan.reason
    if recovery_id is not None:
        annotations[RECOVERY_PARCEL] = id_to_str(recovery_id)
    return annotations


async def _insert_splits(
    conn: AsyncConnection, plans: Sequence[Recording], now: datetime
) -> dict[bytes, bytes]:
    """Insert the split children of `plans`: SUCCESS portions Processed and claimed by one new
    born-Done recovery parcel per parcel, FAILURE portions Unassigned. Returns ParcelID → its
    recovery parcel."""
    if not plans:
        return {}
    wanted: dict[bytes, list[bytes]] = defaultdict(list)
    for plan in plans:
        assert plan.parcel.transformation_id is not None
        for _, entry in plan.splits:
            wanted[plan.parcel.transformation_id].extend(
                child.input_hash for child in (*entry.succeeded, *entry.failed)
            )
    taken = {tid: await db.existing_hashes(conn, tid, hashes) for tid, hashes in wanted.items()}
    facets = await db.compute_facets(conn, [plan.parcel.parcel_id for plan in plans])
    children: list[dict[str, Any]] = []
    parcels: list[dict[str, Any]] = []
    parcel_facets: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    recovery: dict[bytes, bytes] = {}
    for plan in plans:
        tid = plan.parcel.transformation_id
        assert tid is not None
        recovery_id = new_id()
        claimed = 0
        skipped = 0
        for parent, entry in plan.splits:
            for child, success in [(c, True) for c in entry.succeeded] + [
                (c, False) for c in entry.failed
            ]:
                if child.input_hash in taken[tid]:
                    skipped += 1
                    continue
                taken[tid].add(child.input_hash)
                row = child_row(tid, parent.input_id, parent.error_count, child, now)
                if success:
                    row.update(Status=I.PROCESSED, LastParcelID=recovery_id)
                    link = {"TransformationID": tid, "ParcelID": recovery_id}
                    links.append({**link, "InputID": row["InputID"]})
                    claimed += 1
                else:
                    row.update(ErrorCount=parent.error_count + 1)
                children.append(row)
        if skipped:
            plan.warnings.append(
                f"{skipped} split child(ren) already exist in the transformation: not inserted"
            )
        if claimed:
            recovery[plan.parcel.parcel_id] = recovery_id
            parcels.append(
                {
                    "ParcelID": recovery_id,
                    "TransformationID": tid,
                    "Kind": plan.parcel.kind,
                    "Status": P.DONE,
                    "Backend": RECOVERY_BACKEND,
                    "Annotations": {RECOVERY_OF: id_to_str(plan.parcel.parcel_id)},
                    "UpdatedAt": now,
                    "CompletedAt": now,
                }
            )
            facet = facets.get(plan.parcel.parcel_id)
            if facet is not None:
                process_id, requirements_id, hints_id = facet
                parcel_facets.append(
                    {
                        "ParcelID": recovery_id,
                        "ProcessID": process_id,
                        "RequirementsID": requirements_id,
                        "ResolvedHintsID": hints_id,
                        "Parameters": None,
                    }
                )
    # Parcels first: the Processed children's LastParcelID names them.
    await db.insert_born_done_parcels(conn, parcels, parcel_facets)
    await db.insert_inputs(conn, children)
    await db.insert_parcel_inputs(conn, links)
    return recovery


def child_row(
    transformation_id: bytes, parent_id: bytes, error_count: int, child: Input, now: datetime
) -> dict[str, Any]:
    """An Inputs row for a split child (Unassigned, carrying its parent's ErrorCount)."""
    return {
        "TransformationID": transformation_id,
        "InputID": new_id(),
        "ParentInputID": parent_id,
        "InputHash": child.input_hash,
        "LFN": child.lfn if isinstance(child, FileInput) else None,
        "LFNSize": child.lfn_size if isinstance(child, FileInput) else None,
        "Descriptor": child.descriptor,
        "Status": I.UNASSIGNED,
        "ErrorCount": error_count,
        "DelayedUntil": None,
        "LastParcelID": None,
        "UpdatedAt": now,
    }
