"""Execution's commands on a transformation, each applied once per request id.

ResetInputs, WriteOffInputs, CancelParcels (of a transformation) and Flush run as the kernel's
serialised commands (`dxts.core.kernel.commands.run_serialised_command`): they apply in bounded
batches, one transaction each, under a named lock on the transformation that serialises every
command on it, so two retries of one request apply once — the second waits for the first,
finds its log row (event: the RPC's name; data: the command, the request id and the result)
and answers the recorded result. The caller's rights are checked by the edge before (the
definition side decides what the caller may see), and so is the request's shape.

A command without a request id is applied every time, and logged all the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from dxts.core.db import Database
from dxts.core.errors import Aborted, FailedPrecondition
from dxts.core.ids import id_to_str
from dxts.core.kernel.commands import LogScope, Request, Result, run_serialised_command
from dxts.core.locks import LockManager
from dxts.core.plugins import Registry
from dxts.core.policy import Policy
from dxts.execution.logic import operations, packing
from dxts.execution.logic.packing import PackResult
from dxts.execution.logic.transformations import ActiveSnapshot, ActiveTransformation

FLUSH_RETRY_S = 0.2  # how often a Flush looks again whether the running packer has finished
PACK_COUNTS = ("offered", "parcels", "assigned", "problematic", "delayed", "batches")


def _scope(transformation_id: bytes) -> LogScope:
    return LogScope(transformation_id=transformation_id)


async def reset_inputs(
    database: Database,
    locks: LockManager,
    request: Request,
    transformation_id: bytes,
    *,
    input_ids: Sequence[bytes] | None,
    statuses: Sequence[str] | None,
    batch: int,
) -> int:
    """`operations.reset_inputs` once per request id; how many inputs it reset."""

    async def apply() -> Result:
        count = await operations.reset_inputs(
            database, transformation_id, input_ids=input_ids, statuses=statuses, batch=batch
        )
        return {"reset": count}

    result = await run_serialised_command(
        database, locks, request, scope=_scope(transformation_id), apply=apply
    )
    return int(result.get("reset", 0))


async def write_off_inputs(
    database: Database,
    locks: LockManager,
    request: Request,
    transformation_id: bytes,
    *,
    input_ids: Sequence[bytes] | None,
    statuses: Sequence[str] | None,
    batch: int,
) -> int:
    """`operations.write_off_inputs` once per request id; how many inputs it wrote off."""

    async def apply() -> Result:
        count = await operations.write_off_inputs(
            database, transformation_id, input_ids=input_ids, statuses=statuses, batch=batch
        )
        return {"written_off": count}

    result = await run_serialised_command(
        database, locks, request, scope=_scope(transformation_id), apply=apply
    )
    return int(result.get("written_off", 0))


async def cancel_parcels(
    database: Database,
    locks: LockManager,
    request: Request,
    transformation_id: bytes,
    *,
    parcel_ids: Sequence[bytes] | None,
    statuses: Sequence[str] | None,
    batch: int,
) -> operations.Cancellation:
    """`operations.cancel_parcels` of one transformation once per request id (the request's
    reason goes to the backend with the cancel request)."""

    async def apply() -> Result:
        done = await operations.cancel_parcels(
            database,
            parcel_ids=parcel_ids,
            transformation_id=transformation_id,
            statuses=statuses,
            reason=request.reason,
            batch=batch,
        )
        return {"cancelled": done.cancelled, "cancel_requested": done.cancel_requested}

    result = await run_serialised_command(
        database, locks, request, scope=_scope(transformation_id), apply=apply
    )
    return operations.Cancellation(
        int(result.get("cancelled", 0)), int(result.get("cancel_requested", 0))
    )


async def packable(
    snapshot: ActiveSnapshot, transformation_id: bytes, *, status: str
) -> ActiveTransformation:
    """The transformation's record, fresh, if its packer may run; FailedPrecondition naming its
    state (`status` as the caller sees it, or halted) otherwise."""
    await snapshot.refresh()
    record = await snapshot.get(transformation_id)
    if record is None or not record.packs:
        state = "halted" if record is not None and record.halted else status
        raise FailedPrecondition(
            f"transformation {id_to_str(transformation_id)} is {state}: only an Active "
            "transformation's packer runs",
            current_state=state,
        )
    return record


async def flush(
    database: Database,
    locks: LockManager,
    registry: Registry,
    request: Request,
    record: ActiveTransformation,
    *,
    claim_chunk: int,
    batch: int,
    budget_s: float,
    policy: Policy | None = None,
) -> PackResult:
    """One packer invocation with flush=True once per request id, once the running one (a
    sweep's), if any, has finished — waiting `budget_s` at most, else Aborted (retry)."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + budget_s

    async def apply() -> Result:
        while True:
            result = await packing.pack(
                database,
                registry,
                locks,
                record,
                flush=True,
                claim_chunk=claim_chunk,
                batch=batch,
                policy=policy,
            )
            if result.ran:
                return {name: getattr(result, name) for name in PACK_COUNTS} | {
                    "error": result.error,
                    "error_class": result.error_class,
                }
            if loop.time() + FLUSH_RETRY_S >= ends:
                raise Aborted(
                    f"the packer of {id_to_str(record.id)} is busy (a sweep is running it): "
                    "retry the flush"
                )
            await asyncio.sleep(FLUSH_RETRY_S)

    result = await run_serialised_command(
        database, locks, request, scope=_scope(record.id), apply=apply, wait_s=max(budget_s, 0)
    )
    counts = [int(result.get(name) or 0) for name in PACK_COUNTS]
    offered, parcels, assigned, problematic, delayed, batches = counts
    error, error_class = result.get("error"), result.get("error_class")
    return PackResult(
        offered=offered,
        parcels=parcels,
        assigned=assigned,
        problematic=problematic,
        delayed=delayed,
        batches=batches,
        error=error if isinstance(error, str) else None,
        error_class=error_class if isinstance(error_class, str) else None,
    )
