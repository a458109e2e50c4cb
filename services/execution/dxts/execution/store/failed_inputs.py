"""SQL of the HandleFailedInput sweep: the Failed inputs of a transformation with their last
parcel, and locking those still Failed before a decision is applied."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import requirements
from dxts.core.schema.execution import BY_PRIMARY_KEY, compute_parcels, inputs, parcels
from dxts.core.states import InputStatus
from dxts.execution.records import FailedInput
from dxts.execution.store.common import chunked

# The key, in a failed parcel's annotations, of what a RetryWith decision asked of the next
# parcel its inputs are packed into: {"requirements": {...}, "backend": name}.
RETRY_WITH = "retry_with"


def _with_last_parcel(*condition: Any) -> sa.Select[Any]:
    """Inputs meeting `condition`, each with its last parcel's Kind, Status, Backend,
    Annotations and requirements (None when it has none), in key order."""
    i, p, c, r = inputs.c, parcels.c, compute_parcels.c, requirements.c
    return (
        sa.select(
            i.InputID,
            i.ParentInputID,
            i.LFN,
            i.LFNSize,
            i.Descriptor,
            i.ErrorCount,
            i.LastParcelID,
            p.Kind,
            p.Status.label("ParcelStatus"),
            p.Backend,
            p.Annotations,
            r.Requirements,
        )
        .select_from(
            inputs.outerjoin(parcels, p.ParcelID == i.LastParcelID)
            .outerjoin(compute_parcels, c.ParcelID == p.ParcelID)
            .outerjoin(requirements, r.RequirementsID == c.RequirementsID)
        )
        .where(*condition)
        .order_by(i.InputID)
    )


def _failed_input(row: Any) -> FailedInput:
    return FailedInput(
        input_id=bytes(row.InputID),
        parent_input_id=bytes(row.ParentInputID) if row.ParentInputID else None,
        lfn=row.LFN,
        lfn_size=row.LFNSize,
        descriptor=row.Descriptor,
        error_count=row.ErrorCount,
        last_parcel_id=bytes(row.LastParcelID) if row.LastParcelID is not None else None,
        parcel_kind=row.Kind,
        parcel_status=row.ParcelStatus,
        backend=row.Backend,
        annotations=row.Annotations,
        requirements=row.Requirements,
    )


async def failed_page(
    conn: AsyncConnection, transformation_id: bytes, *, after: bytes | None, limit: int
) -> list[FailedInput]:
    """Failed inputs in key order after `after` ((TransformationID, Status) index), each with
    its last parcel."""
    i = inputs.c
    condition = [i.TransformationID == transformation_id, i.Status == InputStatus.FAILED]
    if after is not None:
        condition.append(i.InputID > after)
    rows = await conn.execute(_with_last_parcel(*condition).limit(limit))
    return [_failed_input(row) for row in rows]


async def lock_input(
    conn: AsyncConnection, transformation_id: bytes, input_id: bytes
) -> tuple[str, FailedInput] | None:
    """One input of the transformation, locked (`SELECT … FOR UPDATE` by primary key): its
    status and the input with its last parcel; None when the transformation has no such
    input."""
    i = inputs.c
    found = await conn.execute(
        sa.select(i.Status)
        .with_hint(inputs, BY_PRIMARY_KEY, "mysql")
        .where(i.TransformationID == transformation_id, i.InputID == input_id)
        .with_for_update()
    )
    status = found.scalar_one_or_none()
    if status is None:
        return None
    rows = await conn.execute(
        _with_last_parcel(i.TransformationID == transformation_id, i.InputID == input_id)
    )
    return str(status), _failed_input(rows.one())


async def lock_failed(
    conn: AsyncConnection, transformation_id: bytes, input_ids: Sequence[bytes]
) -> dict[bytes, int]:
    """The inputs among `input_ids` still Failed, locked: InputID → ErrorCount."""
    found: dict[bytes, int] = {}
    for chunk in chunked(sorted(set(input_ids))):
        rows = await conn.execute(
            sa.select(inputs.c.InputID, inputs.c.ErrorCount)
            .with_hint(inputs, BY_PRIMARY_KEY, "mysql")
            .where(
                inputs.c.TransformationID == transformation_id,
                inputs.c.InputID.in_(chunk),
                inputs.c.Status == InputStatus.FAILED,
            )
            .with_for_update()
        )
        found.update((bytes(row.InputID), row.ErrorCount) for row in rows)
    return found


async def annotate_parcels(conn: AsyncConnection, annotations: dict[bytes, dict[str, Any]]) -> None:
    """Replace the Annotations of the given (terminal) parcels: one executemany UPDATE."""
    if not annotations:
        return
    await conn.execute(
        sa.update(parcels)
        .where(parcels.c.ParcelID == sa.bindparam("parcel_id"))
        .values(Annotations=sa.bindparam("annotations", type_=parcels.c.Annotations.type)),
        [{"parcel_id": pid, "annotations": value} for pid, value in annotations.items()],
    )


async def retry_directives(
    conn: AsyncConnection, transformation_id: bytes, input_ids: Sequence[bytes]
) -> dict[bytes, dict[str, Any]]:
    """InputID → the retry directive on the parcel each input last failed in, for those of
    `input_ids` whose last parcel carries one (`RETRY_WITH` in its annotations)."""
    found: dict[bytes, dict[str, Any]] = {}
    i, p = inputs.c, parcels.c
    for chunk in chunked(sorted(set(input_ids))):
        rows = await conn.execute(
            sa.select(i.InputID, p.Annotations)
            .select_from(inputs.join(parcels, p.ParcelID == i.LastParcelID))
            .with_hint(inputs, BY_PRIMARY_KEY, "mysql")
            .where(i.TransformationID == transformation_id, i.InputID.in_(chunk))
        )
        for row in rows:
            annotations = row.Annotations if isinstance(row.Annotations, dict) else {}
            directive = annotations.get(RETRY_WITH)
            if isinstance(directive, dict):
                found[bytes(row.InputID)] = directive
    return found
