"""Recording what a Submit answered: accepted parcels get their identifier row and go to
Assigned together, refused ones go back to Unassigned (one transaction per Submit).

The usual batch is recorded by `record_as_claimed`, whose UPDATE's row count proves it moved
every parcel the claim read, or rolls the transaction back for the locking path
(`record_accepted`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import db_now
from dxts.core.schema.execution import (
    parcels,
)
from dxts.dispatcher.store.identifiers import insert_identifiers
from dxts.dispatcher.store.transitions import (
    ASSIGNED,
    RESERVED,
    UNASSIGNED,
    assign,
    journal,
    lock_parcels,
)


@dataclass(frozen=True)
class Recorded:
    """What recording a batch of accepted parcels did."""

    assigned: list[bytes]
    # Accepted but no longer Reserved when recorded: ParcelID → its status now. A parcel in
    # Completing there was cancelled while being submitted (the backend must be told).
    not_reserved: dict[bytes, str]
    # Accepted, but the identifier clashes with what is recorded (another parcel holds it, or
    # this parcel holds another): left Reserved, the adaptor is misbehaving.
    conflicts: list[bytes]


async def record_accepted(
    conn: AsyncConnection, adaptor: str, accepted: Mapping[bytes, bytes]
) -> Recorded:
    """The backend accepted these parcels (ParcelID → identifier): record the identifiers and
    move the still-Reserved ones to Assigned, in one transaction."""
    state = await lock_parcels(conn, accepted)
    conflicts = await insert_identifiers(conn, adaptor, accepted)
    movable = [p for p in accepted if p not in conflicts and p in state and state[p][2] == RESERVED]
    if movable:
        await assign(conn, movable)
        await journal(conn, [(p, state[p][0], state[p][1]) for p in movable], RESERVED, ASSIGNED)
    return Recorded(
        assigned=movable,
        not_reserved={p: state[p][2] for p in accepted if p in state and state[p][2] != RESERVED},
        conflicts=conflicts,
    )


class NotAsClaimed(Exception):
    """Raised by `record_as_claimed` to roll its transaction back: a parcel is no longer
    Reserved, or an identifier clashes. The batch is then recorded by `record_accepted`."""


async def record_as_claimed(
    conn: AsyncConnection,
    adaptor: str,
    accepted: Mapping[bytes, bytes],
    claimed: Mapping[bytes, tuple[bytes | None, str]],
) -> Recorded:
    """`record_accepted` for the usual batch, in three statements instead of five: every
    accepted parcel still Reserved and every identifier new. The UPDATE locks the parcels (key
    order, like `lock_parcels`) and its row count proves the first, the identifiers' row count the
    second; the journal is built from what the claim read (`claimed`: ParcelID →
    (TransformationID, Kind), which never change). Anything else raises NotAsClaimed."""
    ids = sorted(accepted)
    if await assign(conn, ids) != len(ids) or await insert_identifiers(conn, adaptor, accepted):
        raise NotAsClaimed
    await journal(conn, [(p, *claimed[p]) for p in ids], RESERVED, ASSIGNED)
    return Recorded(assigned=ids, not_reserved={}, conflicts=[])


async def record_refused(conn: AsyncConnection, refused: Iterable[bytes]) -> list[bytes]:
    """Reserved → Unassigned for parcels the backend refused (not an attempt), the backend they
    were reserved for cleared, so that the next claim chooses again (a parcel execution directed
    to a backend keeps its direction: its DirectedParcels row, which the claim reads)."""
    state = await lock_parcels(conn, refused)
    movable = sorted(p for p, (_, _, status) in state.items() if status == RESERVED)
    if not movable:
        return []
    await conn.execute(
        sa.update(parcels)
        .where(parcels.c.ParcelID.in_(movable), parcels.c.Status == RESERVED)
        .values(Status=UNASSIGNED, UpdatedAt=await db_now(conn), Backend=None)
    )
    await journal(conn, [(p, state[p][0], state[p][1]) for p in movable], RESERVED, UNASSIGNED)
    return movable
