"""SQL of forward lineage: which transformations took these files in, and in which parcels.

A file's readers are found like its producers (`operations.producers_of`), from the other end:
driven from Transformations (definition's rows, read only: one per transformation), each row
probes the (TransformationID, LFN) index of Inputs; the parcels that carried those inputs come
from ParcelInputs' (TransformationID, InputID) index. One statement per chunk of LFNs or ids.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import transformations
from dxts.core.schema.execution import inputs, parcel_inputs
from dxts.execution.records import InputRecord
from dxts.execution.store.common import chunked


async def readers_of(conn: AsyncConnection, lfns: Sequence[str]) -> list[InputRecord]:
    """Every Inputs row of these LFNs, in any transformation, by (LFN, TransformationID,
    InputID)."""
    i, t = inputs.c, transformations.c
    found: list[InputRecord] = []
    for chunk in chunked(sorted(set(lfns))):
        rows = await conn.execute(
            sa.select(inputs)
            .select_from(
                transformations.join(
                    inputs, sa.and_(i.TransformationID == t.TransformationID, i.LFN.in_(chunk))
                )
            )
            .order_by(i.LFN, i.TransformationID, i.InputID)
        )
        found.extend(InputRecord.of(row) for row in rows)
    return found


async def parcels_carrying(
    conn: AsyncConnection, carried: Sequence[tuple[bytes, bytes]]
) -> dict[tuple[bytes, bytes], list[bytes]]:
    """(TransformationID, InputID) → the ParcelIDs that carried that input, in key order."""
    by_transformation: dict[bytes, list[bytes]] = defaultdict(list)
    for tid, input_id in carried:
        by_transformation[tid].append(input_id)
    pi = parcel_inputs.c
    found: dict[tuple[bytes, bytes], list[bytes]] = defaultdict(list)
    for tid, ids in sorted(by_transformation.items()):
        for chunk in chunked(sorted(set(ids))):
            rows = await conn.execute(
                sa.select(pi.InputID, pi.ParcelID)
                .where(pi.TransformationID == tid, pi.InputID.in_(chunk))
                .order_by(pi.InputID, pi.ParcelID)
            )
            for row in rows:
                found[(tid, bytes(row.InputID))].append(bytes(row.ParcelID))
    return dict(found)
