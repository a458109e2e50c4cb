"""Outcome recording, step two (docs/dispatching.md): the Completing sweep.

Outputs registered with the file catalogue and written as ParcelOutputs, the status report
applied to each input (splits included), the parcel Done, PartiallyDone or Failed. Re-entrant:
everything but the catalogue registration (itself idempotent) commits in the one transaction
that takes the parcel out of Completing, so a batch interrupted anywhere simply runs again.
Batches run in transactions side by side on a server (`RECORD_LANES`: the server writes one
while this process prepares the other). Replicas record side by side too: a batch locks its
parcels with SKIP LOCKED, so each parcel is recorded by the one transaction that locked it and
the others pass it by; once that one commits the parcel is no longer Completing.

A decision the backend contract leaves to this project: a file the catalogue refuses
(its LFN registered with other content), or that cannot be registered at all, fails the parcel
with the reason: its outputs cannot be recorded.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from dxts.core.catalogue import CatalogueFile, FileCatalogue
from dxts.core.db import Database, Isolation, Transaction, db_now, is_duplicate_key, is_transient
from dxts.core.errors import FailedPrecondition, InvalidArgument
from dxts.core.ids import id_to_str, mint_after, new_ids
from dxts.core.kernel.lanes import in_flight
from dxts.core.states import InputStatus, ParcelStatus
from dxts.execution.logic.parcel_annotations import (
    OUTCOME,
    REASON,
    REASON_LENGTH,
    RECOVERY_PARCEL,
    stored_outcome,
    warned,
)
from dxts.execution.logic.recording import RECORD_LANES
from dxts.execution.logic.recording_plan import Recording, plan_recording
from dxts.execution.logic.splits import insert_splits
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.execution.metrics import PARCELS_RECORDED
from dxts.execution.store import outcomes as store
from dxts.execution.store import watermark
from dxts.execution.store.common import writers_side_by_side
from dxts.execution.store.outcomes import CarriedInput, ParcelMove

log = logging.getLogger(__name__)

RC = Isolation.READ_COMMITTED
I, P = InputStatus, ParcelStatus  # noqa: E741 - the state tables' names
# Parcels per recording transaction, and the inputs they carry at most (a parcel carrying more
# is recorded alone): the batch holds every carried input in memory, so parcels of thousands of
# inputs each must not make it grow with the document (`record_batch`, `record_batch_inputs`).
RECORD_BATCH = 500
RECORD_BATCH_INPUTS = 20_000
SPLIT_RACE_ATTEMPTS = 3  # a batch's runs when a concurrent batch took a split child's identity
PAGE = 1_000  # Completing parcels read per page while looking for recordable ones


def batches(
    sizes: Sequence[tuple[bytes, int]], *, parcels: int, inputs: int
) -> Iterator[list[bytes]]:
    """The parcels of `sizes` ((ParcelID, inputs it carries)), in order, cut into batches of
    at most `parcels` parcels carrying at most `inputs` inputs in all; a parcel carrying more
    than `inputs` is a batch of its own."""
    batch: list[bytes] = []
    carried = 0
    for parcel_id, size in sizes:
        if batch and (len(batch) == parcels or carried + size > inputs):
            yield batch
            batch, carried = [], 0
        batch.append(parcel_id)
        carried += size
    if batch:
        yield batch


class Recorder:
    """Records Completing parcels. The transformations' declared outputs come from the
    snapshot the sweeps hold (`ActiveSnapshot.declared_outputs`), which asks the definition
    side only about a transformation it has never listed."""

    def __init__(
        self, database: Database, catalogue: FileCatalogue, snapshot: ActiveSnapshot
    ) -> None:
        self.database = database
        self.catalogue = catalogue
        self.snapshot = snapshot

    async def record_completing(
        self,
        *,
        batch: int = RECORD_BATCH,
        batch_inputs: int = RECORD_BATCH_INPUTS,
        lanes: int = RECORD_LANES,
    ) -> int:
        """Record every Completing parcel whose outcome has arrived; returns how many.

        Batches run `lanes` at a time (one on SQLite, whose writers queue anyway), each in its
        own transaction over parcels no other batch has: the server works on one batch's
        writes while this process reads and plans the next, and the next page is read while
        they run. A batch that fails transiently (see `record`) cancels the others (each rolls
        back whole: recording is re-entrant) and its error is raised."""
        after = None
        async with in_flight(writers_side_by_side(self.database, lanes)) as running:
            while True:
                page = await self.database.run(
                    functools.partial(store.recordable, after=after, limit=PAGE), isolation=RC
                )
                if not page:
                    break
                after = page[-1][0]
                # Asked before the transactions, which should not wait on another service.
                known = await self._declared({tid for _, tid in page})
                ready = [(p, tid) for p, tid in page if tid is None or tid in known]
                carried = await self.database.run(
                    functools.partial(store.carried_counts, page=ready), isolation=RC
                )
                sizes = [(p, carried.get(p, 0)) for p, _ in ready]
                for chunk in batches(sizes, parcels=batch, inputs=batch_inputs):
                    await running.start(functools.partial(self.record, chunk))
                if len(page) < PAGE:
                    break
        return running.total

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
            if is_transient(error):
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

        async def work(conn: Transaction) -> list[str]:
            now = await db_now(conn)
            rows = [
                row
                for row in (await store.lock_parcels(conn, [parcel_id])).values()
                if row.status == P.COMPLETING
            ]
            carried = await store.carried_inputs(conn, rows)
            plans = [Recording(row, P.DONE, carried.get(row.parcel_id, [])) for row in rows]
            for plan in plans:
                plan.fail(reason)
            await _apply(conn, plans, now)
            return [plan.target for plan in plans]

        try:
            ended = await self.database.run(work, isolation=RC)
        except Exception as failed:
            if is_transient(failed):
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
            except Exception as error:
                if not is_duplicate_key(error) or attempt == SPLIT_RACE_ATTEMPTS:
                    raise
                log.info("a split child was inserted by a batch recorded alongside: again")
        for status, count in Counter(ended).items():
            PARCELS_RECORDED.labels(status).inc(count)
        return len(ended)

    async def _record(self, conn: Transaction, parcel_ids: Sequence[bytes]) -> list[str]:
        now = await db_now(conn)
        # Skipped, not waited for: a parcel locked is being recorded by another lane or replica
        # (or its outcome arriving again), and is no longer Completing once that commits.
        rows = [
            row
            for row in (await store.lock_parcels(conn, parcel_ids, skip_locked=True)).values()
            if row.status == P.COMPLETING and OUTCOME in row.annotations
        ]
        if not rows:
            return []
        carried = await store.carried_inputs(conn, rows)
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
        wanted = {tid for tid in transformation_ids if tid is not None}
        declared = await self.snapshot.declared_outputs(wanted)
        for tid in sorted(wanted - set(declared)):
            log.warning("parcels of %s wait: definition knows no such", id_to_str(tid))
        return declared

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


async def _apply(conn: Transaction, plans: Sequence[Recording], now: datetime) -> None:
    """Write every plan: outputs, input moves, split children and recovery parcels, the parcels'
    terminal moves, with their journals."""
    written = [
        (plan.parcel.parcel_id, output_id, file)
        for plan in plans
        for output_id, file in plan.files
        if output_id is not None
    ]
    if written:
        # Shared until commit, and minted after what is committed: the Edge watermark.
        floor = await watermark.hold_outputs(conn, {output_id for _, output_id, _ in written})
        if floor is not None:
            mint_after(floor)
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
    await store.insert_parcel_outputs(conn, outputs)
    # Every carried input to its fate, one conditional move per transformation and fate.
    held: dict[tuple[bytes, InputStatus], list[CarriedInput]] = defaultdict(list)
    for plan in plans:
        tid = plan.parcel.transformation_id
        if tid is None:
            continue
        for fate, items in plan.fates.items():
            held[(tid, fate)].extend(items)
        held[(tid, I.SPLIT)].extend(item for item, _ in plan.splits)
    for (tid, fate), carried in held.items():
        values = store.BUMP_ERRORS if fate == I.FAILED else None
        await store.move_held_inputs(conn, tid, carried, target=fate, now=now, values=values)
    recovery = await insert_splits(conn, [p for p in plans if p.splits], now)
    await store.move_parcels(
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
    annotations = warned(plan.parcel.annotations, plan.warnings)
    if plan.reason is not None:
        annotations[REASON] = plan.reason
    if recovery_id is not None:
        annotations[RECOVERY_PARCEL] = id_to_str(recovery_id)
    return annotations
