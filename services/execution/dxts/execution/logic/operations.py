"""Operator and lifecycle operations on inputs and parcels, and provenance.

* `reset_inputs` — Problematic → Unassigned, ErrorCount back to 0 (an operator's decision).
* `write_off_inputs` — Unassigned, Failed or Problematic → NotProcessed: what an operator, a
  halt and a close with work left do.
* `cancel_parcels` — Unassigned → Cancelled at once (inputs NotProcessed); Reserved or Assigned →
  Completing with `Annotations.cancel_requested = true`, which the dispatcher passes to the
  backend; the backend's confirmation comes back as the outcome (`recording`).
* `provenance(lfn)` — the parcel that produced a file, from which inputs, running which process,
  and so on upstream; `parcel_provenance` — a parcel's inputs, outputs and recovery children.

Selections are by ids or by statuses of one transformation; large selections run in bounded
batches, one transaction each, so a halt of a million inputs never holds one huge transaction.
Every batch locks what it moves and journals exactly what moved.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.core.errors import FieldViolation, InvalidArgument, NotFound, PermissionDenied
from dxts.core.identity import Identity
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.state_machines import PARCEL, Actor
from dxts.core.states import InputStatus, ParcelStatus
from dxts.execution.logic.parcel_annotations import CANCEL_REASON, CANCEL_REQUESTED, RECOVERY_PARCEL
from dxts.execution.logic.recording import move_carried_inputs
from dxts.execution.records import InputRecord, ParcelRecord
from dxts.execution.store import operations as db
from dxts.execution.store import outcomes as moves
from dxts.execution.store.common import move_inputs
from dxts.execution.store.operations import OutputRow
from dxts.execution.store.outcomes import ParcelMove

RC = Isolation.READ_COMMITTED
BATCH = 1_000
PROVENANCE_RECORDS = 1_000  # a provenance answer stops growing here
I, P = InputStatus, ParcelStatus  # noqa: E741 - the state tables' names

# A reset is for inputs set aside; a Failed one is its hook's to decide, or an operator's in its
# place, one by one (DecideFailedInput).
RESETTABLE = (I.PROBLEMATIC,)
WRITABLE_OFF = (I.UNASSIGNED, I.FAILED, I.PROBLEMATIC)  # to NotProcessed (operator, halt, close)
CANCELLABLE = (P.UNASSIGNED, P.RESERVED, P.ASSIGNED)


# -- rights ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """The authenticated caller, and the roles that widen what it may do."""

    identity: Identity
    operator_role: str = "operator"
    service_role: str = "service"

    @property
    def is_service(self) -> bool:
        """dxts's own components (the dispatcher, definition's lifecycle): every VO."""
        return self.identity.has_role(self.service_role)

    def sees(self, vo: str) -> bool:
        return self.is_service or self.identity.vo == vo

    def check_steers(self, vo: str, sub: str, kind: str, identifier: bytes) -> None:
        """NotFound across VOs; PermissionDenied to a plain user steering someone else's."""
        if not self.sees(vo):
            raise NotFound(kind, id_to_str(identifier))
        if not (
            self.is_service
            or self.identity.sub == sub
            or self.identity.has_role(self.operator_role)
        ):
            raise PermissionDenied(
                f"{kind} {id_to_str(identifier)} belongs to {sub}: steering it needs the "
                f"{self.operator_role!r} role"
            )


async def parcel_owners(
    database: Database, parcel_ids: Sequence[bytes]
) -> dict[bytes, tuple[bytes | None, str | None, str | None]]:
    """ParcelID → (its TransformationID, or for a user parcel its VO and submitter)."""
    return await database.run(
        functools.partial(db.parcel_owners, parcel_ids=parcel_ids), isolation=RC
    )


# -- inputs ---------------------------------------------------------------------------------------


def _statuses(wanted: Sequence[str], allowed: Sequence[str], what: str) -> list[str]:
    problems = [
        FieldViolation(f"selection.statuses[{i}]", f"{what} applies to {', '.join(allowed)}")
        for i, status in enumerate(wanted)
        if status not in allowed
    ]
    if problems:
        raise InvalidArgument(problems)
    return list(dict.fromkeys(wanted))


def _selection(input_ids: Sequence[bytes] | None, statuses: Sequence[str] | None) -> None:
    if (input_ids is None) == (statuses is None) or not (input_ids or statuses):
        raise InvalidArgument("give ids or statuses (exactly one, not empty)", field="selection")


async def _move_selected(
    database: Database,
    transformation_id: bytes,
    input_ids: Sequence[bytes] | None,
    sources: Sequence[str],
    target: str,
    *,
    reset_errors: bool,
    batch: int,
) -> int:
    """Move the selected inputs that are in one of `sources` to `target`, batch by batch."""
    values = moves.RESET_ERRORS if reset_errors else None
    moved = 0
    if input_ids is not None:
        wanted = sorted(set(input_ids))
        for start in range(0, len(wanted), batch):
            chunk = wanted[start : start + batch]

            async def by_ids(conn: Transaction, chunk: Sequence[bytes] = chunk) -> int:
                now = await db_now(conn)
                return sum(
                    [
                        await _move(conn, transformation_id, chunk, source, target, now, values)
                        for source in sources
                    ]
                )

            moved += await database.run(by_ids, isolation=RC)
        return moved
    for source in sources:
        while True:

            async def by_status(conn: Transaction, source: str = source) -> int:
                ids = await db.input_ids_in(conn, transformation_id, source, limit=batch)
                if not ids:
                    return 0
                now = await db_now(conn)
                return await _move(conn, transformation_id, ids, source, target, now, values)

            count = await database.run(by_status, isolation=RC)
            moved += count
            if count < batch:
                break
    return moved


async def _move(
    conn: Transaction,
    transformation_id: bytes,
    input_ids: Sequence[bytes],
    source: str,
    target: str,
    now: datetime,
    values: Mapping[str, Any] | None,
) -> int:
    # A Failed input is written off by the core (a halt); the rest is an operator's decision.
    actor = Actor.CORE if source == I.FAILED else Actor.OPERATOR
    return await move_inputs(
        conn,
        transformation_id,
        input_ids,
        source=source,
        target=target,
        actor=actor,
        now=now,
        values=values,
    )


async def reset_inputs(
    database: Database,
    transformation_id: bytes,
    *,
    input_ids: Sequence[bytes] | None = None,
    statuses: Sequence[str] | None = None,
    batch: int = BATCH,
) -> int:
    """Problematic inputs back to Unassigned with ErrorCount 0; returns how many moved (an id
    that is not Problematic is left as it is)."""
    _selection(input_ids, statuses)
    if statuses is not None:
        _statuses(statuses, sorted(RESETTABLE), "a reset")
    return await _move_selected(
        database,
        transformation_id,
        input_ids,
        sorted(RESETTABLE),
        I.UNASSIGNED,
        reset_errors=True,
        batch=batch,
    )


async def write_off_inputs(
    database: Database,
    transformation_id: bytes,
    *,
    input_ids: Sequence[bytes] | None = None,
    statuses: Sequence[str] | None = None,
    batch: int = BATCH,
) -> int:
    """Unassigned, Failed or Problematic inputs (all of the selection that is in one of those)
    to NotProcessed; returns how many moved."""
    _selection(input_ids, statuses)
    sources = WRITABLE_OFF if statuses is None else _statuses(statuses, WRITABLE_OFF, "a write-off")
    return await _move_selected(
        database,
        transformation_id,
        input_ids,
        sources,
        I.NOT_PROCESSED,
        reset_errors=False,
        batch=batch,
    )


# -- parcels --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cancellation:
    cancelled: int  # Unassigned parcels, now Cancelled
    cancel_requested: int  # Reserved or Assigned parcels, now Completing with a cancel request


async def cancel_parcels(
    database: Database,
    *,
    parcel_ids: Sequence[bytes] | None = None,
    transformation_id: bytes | None = None,
    statuses: Sequence[str] | None = None,
    reason: str = "",
    batch: int = BATCH,
) -> Cancellation:
    """Cancel the selected parcels (by ids, or the transformation's parcels in `statuses`);
    parcels past Assigned are left as they are."""
    if parcel_ids is None:
        if transformation_id is None or not statuses:
            raise InvalidArgument(
                "give parcel ids, or a transformation and statuses", field="selection"
            )
        wanted_statuses = _statuses(statuses, CANCELLABLE, "a cancellation")
    elif statuses:
        raise InvalidArgument("give ids or statuses, not both", field="selection")
    cancelled = requested = 0

    async def cancel(conn: Transaction, ids: Sequence[bytes]) -> tuple[int, int]:
        now = await db_now(conn)
        rows = await moves.lock_parcels(conn, ids)
        plan: list[ParcelMove] = []
        for row in rows.values():
            if transformation_id is not None and row.transformation_id != transformation_id:
                continue
            if row.status == P.UNASSIGNED:
                plan.append(ParcelMove(row, P.CANCELLED, None, completed=True))
            elif row.status in (P.RESERVED, P.ASSIGNED):
                annotations = {**row.annotations, CANCEL_REQUESTED: True}
                if reason:
                    annotations[CANCEL_REASON] = reason[:512]
                plan.append(ParcelMove(row, P.COMPLETING, annotations))
        for move in plan:
            PARCEL.check(move.row.status, move.target, Actor.CORE)
        await moves.move_parcels(conn, plan, now)
        written_off = [m.row for m in plan if m.target == P.CANCELLED]
        await move_carried_inputs(conn, written_off, I.NOT_PROCESSED, now)
        done = sum(1 for m in plan if m.target == P.CANCELLED)
        return done, len(plan) - done

    if parcel_ids is not None:
        wanted = sorted(set(parcel_ids))
        for start in range(0, len(wanted), batch):
            chunk = wanted[start : start + batch]
            c, r = await database.run(functools.partial(cancel, ids=chunk), isolation=RC)
            cancelled, requested = cancelled + c, requested + r
        return Cancellation(cancelled, requested)
    assert transformation_id is not None
    while True:

        async def page(conn: Transaction) -> tuple[int, int, int]:
            ids = await db.parcel_ids_in(conn, transformation_id, wanted_statuses, limit=batch)
            return (*await cancel(conn, ids), len(ids)) if ids else (0, 0, 0)

        c, r, seen = await database.run(page, isolation=RC)
        cancelled, requested = cancelled + c, requested + r
        if seen < batch:
            return Cancellation(cancelled, requested)


# -- provenance -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProducerRecord:
    """One file and the parcel that produced it: its process and the inputs it consumed."""

    output: OutputRow
    parcel: ParcelRecord  # with its ProcessID
    inputs: list[InputRecord]
    depth: int


@dataclass(frozen=True)
class ParcelProvenance:
    parcel: ParcelRecord  # with its ProcessID
    inputs: list[InputRecord]
    outputs: list[OutputRow]
    recovery_children: list[InputRecord] = field(default_factory=list)


async def provenance(database: Database, lfn: str, *, max_depth: int = 0) -> list[ProducerRecord]:
    """Who produced `lfn`, then who produced the files its parcel consumed, and so on, up to
    `max_depth` producer steps (0: all the way); NotFound when nothing here produced it."""
    if not lfn:
        raise InvalidArgument("required", field="lfn")
    if max_depth < 0:
        raise InvalidArgument("must not be negative", field="max_depth")

    async def work(conn: Transaction) -> list[ProducerRecord]:
        records: list[ProducerRecord] = []
        seen: set[bytes] = set()
        wanted, depth = [lfn], 1
        while wanted and len(records) < PROVENANCE_RECORDS:
            outputs = [o for o in await db.producers_of(conn, wanted) if o.output_id not in seen]
            if not outputs:
                break
            seen.update(o.output_id for o in outputs)
            rows = await db.parcel_rows(conn, [o.parcel_id for o in outputs])
            consumed = await _consumed(conn, [rows[o.parcel_id] for o in outputs])
            for output in outputs:
                records.append(
                    ProducerRecord(
                        output, rows[output.parcel_id], consumed.get(output.parcel_id, []), depth
                    )
                )
            wanted = sorted({i.lfn for items in consumed.values() for i in items if i.lfn})
            if max_depth and depth >= max_depth:
                break
            depth += 1
        return records[:PROVENANCE_RECORDS]

    records = await database.run(work, isolation=RC)
    if not records:
        raise NotFound("file", lfn)
    return records


async def _consumed(
    conn: Transaction, parcels: Sequence[ParcelRecord]
) -> dict[bytes, list[InputRecord]]:
    by_transformation: dict[bytes, list[bytes]] = defaultdict(list)
    for row in parcels:
        if row.transformation_id is not None:
            by_transformation[row.transformation_id].append(row.parcel_id)
    found: dict[bytes, list[InputRecord]] = {}
    for tid, ids in by_transformation.items():
        found.update(await db.inputs_of_parcels(conn, tid, ids))
    return found


async def parcel_provenance(database: Database, parcel_id: bytes) -> ParcelProvenance:
    """A parcel with the inputs it carried, the files it produced, and the split children its
    recovery parcel claimed (those of its inputs it reported SPLIT with a succeeded part)."""

    async def work(conn: Transaction) -> ParcelProvenance:
        row = (await db.parcel_rows(conn, [parcel_id])).get(parcel_id)
        if row is None:
            raise NotFound("parcel", id_to_str(parcel_id))
        consumed = await _consumed(conn, [row])
        outputs = await db.outputs_of(conn, [parcel_id])
        children: list[InputRecord] = []
        recovery = (row.annotations or {}).get(RECOVERY_PARCEL)
        if recovery and row.transformation_id is not None:
            recovery_id = id_from_str(recovery, field="Annotations.recovery_parcel_id")
            claimed = await db.inputs_of_parcels(conn, row.transformation_id, [recovery_id])
            children = claimed.get(recovery_id, [])
        return ParcelProvenance(row, consumed.get(parcel_id, []), outputs, children)

    return await database.run(work, isolation=RC)
