"""SQL of the operator operations: selecting what to reset, write off or cancel; provenance.

Provenance reads TransformationOutputs (definition's rows, read only): it is the one table that
lists every declared output, and the (TransformationOutputID, LFN) index of ParcelOutputs —
"which parcel produced a file" — can only be probed output by output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import transformation_outputs
from dxts.core.schema.execution import (
    compute_parcels,
    inputs,
    parcel_inputs,
    parcel_outputs,
    parcels,
    user_parcels,
)
from dxts.execution.records import InputRecord, ParcelRecord
from dxts.execution.store.common import chunked


async def input_ids_in(
    conn: AsyncConnection, transformation_id: bytes, status: str, *, limit: int
) -> list[bytes]:
    """Up to `limit` inputs of the transformation in `status`, locked, in key order."""
    rows = await conn.execute(
        sa.select(inputs.c.InputID)
        .where(inputs.c.TransformationID == transformation_id, inputs.c.Status == status)
        .order_by(inputs.c.InputID)
        .limit(limit)
        .with_for_update()
    )
    return [bytes(i) for i in rows.scalars()]


async def parcel_ids_in(
    conn: AsyncConnection, transformation_id: bytes, statuses: Sequence[str], *, limit: int
) -> list[bytes]:
    rows = await conn.execute(
        sa.select(parcels.c.ParcelID)
        .where(parcels.c.TransformationID == transformation_id, parcels.c.Status.in_(statuses))
        .order_by(parcels.c.ParcelID)
        .limit(limit)
    )
    return [bytes(p) for p in rows.scalars()]


async def parcel_owners(
    conn: AsyncConnection, parcel_ids: Sequence[bytes]
) -> dict[bytes, tuple[bytes | None, str | None, str | None]]:
    """ParcelID → (TransformationID, and for a user parcel its VO and Sub)."""
    found: dict[bytes, tuple[bytes | None, str | None, str | None]] = {}
    for chunk in chunked(sorted(set(parcel_ids))):
        rows = await conn.execute(
            sa.select(
                parcels.c.ParcelID,
                parcels.c.TransformationID,
                user_parcels.c.VO,
                user_parcels.c.Sub,
            )
            .select_from(
                parcels.outerjoin(user_parcels, user_parcels.c.ParcelID == parcels.c.ParcelID)
            )
            .where(parcels.c.ParcelID.in_(chunk))
        )
        for row in rows:
            tid = bytes(row.TransformationID) if row.TransformationID else None
            found[bytes(row.ParcelID)] = (tid, row.VO, row.Sub)
    return found


# -- provenance -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputRow:
    output_id: bytes
    transformation_output_id: bytes
    name: str
    parcel_id: bytes
    lfn: str
    lfn_size: int | None


def _output_columns() -> tuple[Any, ...]:
    po, o = parcel_outputs.c, transformation_outputs.c
    return (po.OutputID, po.TransformationOutputID, o.Name, po.ParcelID, po.LFN, po.LFNSize)


def _output(row: Any) -> OutputRow:
    return OutputRow(
        bytes(row.OutputID),
        bytes(row.TransformationOutputID),
        row.Name,
        bytes(row.ParcelID),
        row.LFN,
        row.LFNSize,
    )


async def producers_of(conn: AsyncConnection, lfns: Sequence[str]) -> list[OutputRow]:
    """The ParcelOutputs rows of these LFNs. Driven from TransformationOutputs (one row per
    step output), each probing the (TransformationOutputID, LFN) index."""
    po, o = parcel_outputs.c, transformation_outputs.c
    found: list[OutputRow] = []
    for chunk in chunked(sorted(set(lfns))):
        rows = await conn.execute(
            sa.select(*_output_columns())
            .select_from(
                transformation_outputs.join(
                    parcel_outputs,
                    sa.and_(
                        po.TransformationOutputID == o.TransformationOutputID, po.LFN.in_(chunk)
                    ),
                )
            )
            .order_by(po.LFN, po.OutputID)
        )
        found.extend(_output(row) for row in rows)
    return found


async def outputs_of(conn: AsyncConnection, parcel_ids: Sequence[bytes]) -> list[OutputRow]:
    """What these parcels produced, through ParcelOutputs' (ParcelID) index."""
    po, o = parcel_outputs.c, transformation_outputs.c
    found: list[OutputRow] = []
    for chunk in chunked(sorted(set(parcel_ids))):
        rows = await conn.execute(
            sa.select(*_output_columns())
            .select_from(
                parcel_outputs.join(
                    transformation_outputs,
                    o.TransformationOutputID == po.TransformationOutputID,
                )
            )
            .where(po.ParcelID.in_(chunk))
            .order_by(po.ParcelID, po.OutputID)
        )
        found.extend(_output(row) for row in rows)
    return found


async def parcel_rows(
    conn: AsyncConnection, parcel_ids: Sequence[bytes]
) -> dict[bytes, ParcelRecord]:
    """Parcels with their compute facet's ProcessID (None for data parcels)."""
    found: dict[bytes, ParcelRecord] = {}
    for chunk in chunked(sorted(set(parcel_ids))):
        rows = await conn.execute(
            sa.select(parcels, compute_parcels.c.ProcessID)
            .select_from(
                parcels.outerjoin(compute_parcels, compute_parcels.c.ParcelID == parcels.c.ParcelID)
            )
            .where(parcels.c.ParcelID.in_(chunk))
        )
        found.update(
            (bytes(row.ParcelID), ParcelRecord.of(row, process_id=row.ProcessID)) for row in rows
        )
    return found


async def inputs_of_parcels(
    conn: AsyncConnection, transformation_id: bytes, parcel_ids: Sequence[bytes]
) -> dict[bytes, list[InputRecord]]:
    """ParcelID → the Inputs rows it carried (ParcelInputs' primary key)."""
    pi, i = parcel_inputs.c, inputs.c
    found: dict[bytes, list[InputRecord]] = {}
    for chunk in chunked(sorted(set(parcel_ids))):
        rows = await conn.execute(
            sa.select(pi.ParcelID, inputs)
            .select_from(
                parcel_inputs.join(
                    inputs,
                    sa.and_(i.TransformationID == pi.TransformationID, i.InputID == pi.InputID),
                )
            )
            .where(pi.TransformationID == transformation_id, pi.ParcelID.in_(chunk))
            .order_by(pi.ParcelID, pi.InputID)
        )
        for row in rows:
            found.setdefault(bytes(row[0]), []).append(InputRecord.of(row))
    return found
