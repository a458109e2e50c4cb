"""Outcome recording, step one (docs/dispatching.md): what the dispatcher forwards (RecordOutcomes).

A finished parcel goes Assigned → Completing with the outcome stored on it
(`Annotations.outcome`) and, when the backend measured it, its resource usage
(`Annotations.usage`, in the units the approving action EstimateResourceUsage reads: cpu_hours,
wall_hours, memory_gb); a failed one Assigned → Failed with its inputs Failed (ErrorCount + 1).
A parcel Completing with a cancel request takes its confirmation: CANCELLED → Cancelled with its
inputs NotProcessed, a failure → Failed, a success is stored for recording like any other.
Idempotent: an outcome for a parcel already past that point is acknowledged as ALREADY_RECORDED
and changes nothing; an unknown parcel is acknowledged as UNKNOWN_PARCEL, logged, and changes
nothing. Step two, the Completing sweep, is `completing`.

Transactions of a batch of parcels, two of them side by side on a server (`RECORD_LANES`: the
server writes one while this process prepares the other).

Decisions the backend contract leaves to this project:

* A backend that cancels an Assigned parcel nobody asked it to cancel has failed it: Failed,
  inputs Failed (there is no Assigned → Cancelled edge, and the inputs deserve a retry).
* An outcome for a parcel still Unassigned or Reserved is not recorded (UNKNOWN_PARCEL with the
  reason): it cannot have run; the adaptor reports it again once the parcel is Assigned. The
  one exception is the dispatcher's record of a Submit its backend refused as a whole
  (`refused_submission`: FAILED, class `refused`, no identifier, from the backend the parcel
  was reserved for): that parcel goes Reserved → Failed, its inputs Failed, since the same
  request would be refused again.
* An outcome from a backend other than the parcel's is not recorded either (UNKNOWN_PARCEL).
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from dxts.core.adaptor.codec import outcome_to_json
from dxts.core.adaptor.model import (
    FailureClass,
    Outcome,
    OutcomeAck,
    OutcomeDisposition,
    OutcomeResult,
)
from dxts.core.builtins.actions import USAGE
from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.core.errors import InvalidArgument
from dxts.core.ids import id_from_str
from dxts.core.kernel.lanes import each
from dxts.core.states import InputStatus, ParcelStatus
from dxts.execution.logic.parcel_annotations import (
    OUTCOME,
    REASON,
    usage_annotation,
    with_changes,
)
from dxts.execution.metrics import OUTCOMES, PARCELS_FAILED
from dxts.execution.store import outcomes as store
from dxts.execution.store.common import writers_side_by_side
from dxts.execution.store.outcomes import ParcelMove, ParcelRow

log = logging.getLogger(__name__)

T = TypeVar("T")

RC = Isolation.READ_COMMITTED
I, P = InputStatus, ParcelStatus  # noqa: E741 - the state tables' names
RECORD_LANES = 2  # recording transactions at a time
LANE_PARCELS = 200  # the fewest parcels worth a transaction of their own alongside another

RECORDED = OutcomeDisposition.RECORDED
ALREADY = OutcomeDisposition.ALREADY_RECORDED
UNKNOWN = OutcomeDisposition.UNKNOWN_PARCEL
SUCCEEDED = OutcomeResult.SUCCEEDED
CANCELLED = OutcomeResult.CANCELLED
UNCLASSIFIED = FailureClass.UNSPECIFIED


def _ack(outcome: Outcome, disposition: OutcomeDisposition, message: str = "") -> OutcomeAck:
    return OutcomeAck(
        parcel_id=outcome.parcel_id,
        backend=outcome.backend,
        identifier=outcome.identifier,
        disposition=disposition,
        message=message,
    )


async def record_outcomes(database: Database, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
    """Take each outcome's parcel past Assigned; one ack per outcome, in order.

    One transaction, or two side by side over halves of the parcels for a large batch on a
    server (`RECORD_LANES`, at least `LANE_PARCELS` each): the server writes one half while
    this process prepares the other. An outcome is recorded once whichever half holds it, so
    a batch whose second half failed is simply forwarded again."""
    acks: list[OutcomeAck | None] = [None] * len(outcomes)
    by_parcel: dict[bytes, list[int]] = defaultdict(list)
    for index, outcome in enumerate(outcomes):
        try:
            parcel_id = id_from_str(outcome.parcel_id, field=f"outcomes[{index}].parcel_id")
        except InvalidArgument as error:
            acks[index] = _ack(outcome, UNKNOWN, str(error))
            log.warning("outcome for no parcel id from %s: %s", outcome.backend or "?", error)
            continue
        by_parcel[parcel_id].append(index)

    async def work(conn: Transaction, parcel_ids: Sequence[bytes]) -> dict[int, OutcomeAck]:
        now = await db_now(conn)
        rows = await store.lock_parcels(conn, parcel_ids)
        answers: dict[int, OutcomeAck] = {}
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
        await store.move_parcels(conn, moves, now)
        await move_carried_inputs(conn, inputs_failed, I.FAILED, now, values=store.BUMP_ERRORS)
        await move_carried_inputs(conn, inputs_written_off, I.NOT_PROCESSED, now)
        return answers

    ids = sorted(by_parcel)
    lanes = writers_side_by_side(database, max(1, min(RECORD_LANES, len(ids) // LANE_PARCELS)))
    size = -(-len(ids) // lanes)
    parts = [ids[start : start + size] for start in range(0, len(ids), size)]
    transactions = [
        functools.partial(database.run, functools.partial(work, parcel_ids=part), isolation=RC)
        for part in parts
    ]
    # Side by side: the first failure cancels the others (each rolls back whole).
    for answered in await each(transactions, lambda call: call(), width=len(transactions)):
        for index, ack in answered.items():
            acks[index] = ack
    _count_failures(outcomes, acks)
    answers = [ack for ack in acks if ack is not None]
    for answer in answers:
        OUTCOMES.labels(answer.disposition.value).inc()
        if answer.disposition == UNKNOWN:
            log.warning("outcome not recorded for %s: %s", answer.parcel_id, answer.message)
    return answers


def _count_failures(outcomes: Sequence[Outcome], acks: Sequence[OutcomeAck | None]) -> None:
    """The parcels these outcomes failed, counted by class and backend (once committed: a
    RECORDED ack names the status the parcel took)."""
    for outcome, ack in zip(outcomes, acks, strict=True):
        if ack is not None and ack.disposition == RECORDED and ack.message == P.FAILED:
            failure_class = outcome.failure.failure_class if outcome.failure else UNCLASSIFIED
            PARCELS_FAILED.labels(failure_class.value, outcome.backend).inc()


def refused_submission(outcome: Outcome) -> bool:
    """Whether `outcome` is the dispatcher's record of a Submit refused as a whole: FAILED,
    class `refused`, with no identifier (the backend accepted nothing)."""
    return (
        outcome.result == OutcomeResult.FAILED
        and outcome.failure is not None
        and outcome.failure.failure_class == FailureClass.REFUSED
        and not outcome.identifier
    )


def _refusal(row: ParcelRow | None, outcome: Outcome) -> OutcomeAck | None:
    """Why the outcome cannot be this parcel's, as its ack; None when it can."""
    if row is None:
        return _ack(outcome, UNKNOWN, f"no parcel {outcome.parcel_id}")
    if row.backend and outcome.backend and row.backend != outcome.backend:
        return _ack(outcome, UNKNOWN, f"parcel runs on {row.backend}, not on {outcome.backend}")
    reserved_for_it = (
        row.status == P.RESERVED and row.backend is not None and row.backend == outcome.backend
    )
    if reserved_for_it and refused_submission(outcome):
        return None
    if row.status in (P.UNASSIGNED, P.RESERVED):
        return _ack(outcome, UNKNOWN, f"parcel is {row.status}: it has not been dispatched")
    return None


def _move_for(row: ParcelRow, outcome: Outcome) -> ParcelMove | None:
    """What the outcome does to the parcel; None when it was recorded before."""
    waiting = row.status == P.COMPLETING and OUTCOME not in row.annotations
    refused = row.status == P.RESERVED  # `_refusal` let only a refused submission through
    if row.status != P.ASSIGNED and not (waiting or refused):
        return None
    stored = outcome_to_json(outcome)
    annotations = with_changes(row.annotations, **{OUTCOME: stored})
    usage = usage_annotation(stored.get("usage"))
    if usage is not None:
        annotations[USAGE] = usage
    if outcome.result == SUCCEEDED:
        return ParcelMove(row, P.COMPLETING, annotations)
    if outcome.result == CANCELLED and waiting:
        return ParcelMove(row, P.CANCELLED, annotations, completed=True)
    why = outcome.message or outcome.result.value
    if outcome.result == CANCELLED:
        why = f"cancelled by the backend unasked: {why}"
    return ParcelMove(row, P.FAILED, with_changes(annotations, **{REASON: why}), completed=True)


async def move_carried_inputs(
    conn: Transaction,
    rows: Sequence[ParcelRow],
    target: InputStatus,
    now: datetime,
    *,
    values: Mapping[str, Any] | None = None,
) -> None:
    """Move every input still Assigned to one of `rows` to `target`."""
    by_transformation: dict[bytes, list[store.CarriedInput]] = defaultdict(list)
    transformations = {row.parcel_id: row.transformation_id for row in rows}
    for parcel_id, carried in (await store.carried_inputs(conn, rows)).items():
        tid = transformations[parcel_id]
        assert tid is not None  # carried_inputs reads a transformation's parcels only
        by_transformation[tid].extend(carried)
    for tid, held in by_transformation.items():
        await store.move_held_inputs(conn, tid, held, target=target, now=now, values=values)
