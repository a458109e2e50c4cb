"""The cap on each VO's parcels in flight (Reserved, Assigned, Completing), enforced by the claim.

A claim under caps runs in its one transaction:

1. count what each VO has in flight, and leave the VOs already at their cap out of the claiming
   statement, so that their waiting parcels never fill the batch and starve the other VOs;
2. claim as usual (`FOR UPDATE SKIP LOCKED`, key order);
3. lock the `InFlightLocks` row of every capped VO among the claimed parcels (key order, created
   put-if-absent), count those VOs again and keep, per VO, only as many parcels as it has room
   for: the rest are not reserved and their row locks go with the transaction.

Step 3 is the exact one: a claimer holding a VO's row has seen every reservation committed
before it (READ COMMITTED), and the next one waits for its commit, so claimers of one VO take
turns and never both fill the same room. Step 1 reads without locks: it only keeps full VOs out
of the batch. On SQLite every transaction begins IMMEDIATE (a single writer): the same order.
Without a cap nothing of this runs: the claim is the plain statement.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import ownership, transformations
from dxts.core.schema.execution import in_flight_locks, parcels, user_parcels
from dxts.core.states import ParcelStatus

IN_FLIGHT = tuple(
    status.value
    for status in (ParcelStatus.RESERVED, ParcelStatus.ASSIGNED, ParcelStatus.COMPLETING)
)


@dataclass(frozen=True)
class InFlightCaps:
    """Parcels in flight a VO may have at most: `per_vo` for the VOs named there, else
    `default` (None: no cap)."""

    default: int | None = None
    per_vo: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.default is not None or bool(self.per_vo)

    def of(self, vo: str) -> int | None:
        return self.per_vo.get(vo, self.default)


def _transformations_of(vos: Collection[str]) -> sa.Select[Any]:
    return (
        sa.select(transformations.c.TransformationID)
        .join(ownership, ownership.c.OwnershipID == transformations.c.OwnershipID)
        .where(ownership.c.VO.in_(sorted(vos)))
    )


async def in_flight(conn: AsyncConnection, vos: Collection[str] | None = None) -> dict[str, int]:
    """Parcels in flight per VO (of `vos`, or of every VO that has some): the parcels of its
    transformations and its users'."""
    of_transformations = (
        sa.select(ownership.c.VO, sa.func.count())
        .select_from(parcels)
        .join(transformations, transformations.c.TransformationID == parcels.c.TransformationID)
        .join(ownership, ownership.c.OwnershipID == transformations.c.OwnershipID)
        .where(parcels.c.Status.in_(IN_FLIGHT))
        .group_by(ownership.c.VO)
    )
    of_users = (
        sa.select(user_parcels.c.VO, sa.func.count())
        .select_from(parcels)
        .join(user_parcels, user_parcels.c.ParcelID == parcels.c.ParcelID)
        .where(parcels.c.Status.in_(IN_FLIGHT))
        .group_by(user_parcels.c.VO)
    )
    if vos is not None:
        of_transformations = of_transformations.where(ownership.c.VO.in_(sorted(vos)))
        of_users = of_users.where(user_parcels.c.VO.in_(sorted(vos)))
    counts: dict[str, int] = {}
    for statement in (of_transformations, of_users):
        for vo, count in await conn.execute(statement):
            counts[vo] = counts.get(vo, 0) + int(count)
    return counts


async def full_vos(conn: AsyncConnection, caps: InFlightCaps) -> set[str]:
    """The VOs at (or over) their cap now, read without locks."""
    counts = await in_flight(conn, None if caps.default is not None else caps.per_vo)
    full = {vo for vo, count in counts.items() if (cap := caps.of(vo)) is not None and count >= cap}
    # A VO capped at 0 is full with nothing in flight.
    return full | {vo for vo, cap in caps.per_vo.items() if cap <= 0}


def not_of(vos: Collection[str]) -> list[sa.ColumnElement[bool]]:
    """Conditions on Parcels leaving out the parcels of `vos` (subqueries: a locking read does
    not lock the rows its subqueries read)."""
    if not vos:
        return []
    users = sa.select(user_parcels.c.ParcelID).where(user_parcels.c.VO.in_(sorted(vos)))
    return [
        sa.or_(
            parcels.c.TransformationID.is_(None),
            parcels.c.TransformationID.not_in(_transformations_of(vos)),
        ),
        parcels.c.ParcelID.not_in(users),
    ]


async def vos_of(
    conn: AsyncConnection, claimed: Collection[tuple[bytes, bytes | None]]
) -> dict[bytes, str]:
    """ParcelID → VO, of (ParcelID, TransformationID) pairs."""
    found: dict[bytes, str] = {}
    tids = sorted({tid for _, tid in claimed if tid is not None})
    if tids:
        rows = await conn.execute(
            sa.select(transformations.c.TransformationID, ownership.c.VO)
            .join(ownership, ownership.c.OwnershipID == transformations.c.OwnershipID)
            .where(transformations.c.TransformationID.in_(tids))
        )
        vo_of_transformation = {bytes(row[0]): row[1] for row in rows}
        found.update(
            {pid: vo_of_transformation[tid] for pid, tid in claimed if tid in vo_of_transformation}
        )
    users = sorted(pid for pid, tid in claimed if tid is None)
    if users:
        rows = await conn.execute(
            sa.select(user_parcels.c.ParcelID, user_parcels.c.VO).where(
                user_parcels.c.ParcelID.in_(users)
            )
        )
        found.update({bytes(row[0]): row[1] for row in rows})
    return found


async def _lock(conn: AsyncConnection, vos: Collection[str]) -> None:
    """Hold the lock rows of `vos` exclusively until the transaction ends, creating the missing
    ones (a no-op update on a duplicate rather than INSERT IGNORE, which swallows real errors);
    key order, so that two claimers never deadlock on them."""
    rows = [{"VO": vo} for vo in sorted(vos)]
    if conn.dialect.name == "sqlite":
        await conn.execute(sqlite.insert(in_flight_locks).on_conflict_do_nothing(), rows)
    else:
        statement = mysql.insert(in_flight_locks)
        await conn.execute(statement.on_duplicate_key_update(VO=statement.inserted.VO), rows)
    await conn.execute(
        sa.select(in_flight_locks.c.VO)
        .where(in_flight_locks.c.VO.in_(sorted(vos)))
        .order_by(in_flight_locks.c.VO)
        .with_for_update()
    )


async def within_caps(
    conn: AsyncConnection, claimed: list[tuple[bytes, bytes | None]], caps: InFlightCaps
) -> set[bytes]:
    """Of the claimed (ParcelID, TransformationID) pairs, in key order, the parcels each VO has
    room for, its lock row held until the transaction ends."""
    vo_of = await vos_of(conn, claimed)
    capped = {vo for vo in vo_of.values() if caps.of(vo) is not None}
    if not capped:
        return {pid for pid, _ in claimed}
    await _lock(conn, capped)
    room = {vo: (caps.of(vo) or 0) for vo in capped}
    for vo, count in (await in_flight(conn, capped)).items():
        room[vo] -= count
    kept = set()
    for pid, _ in claimed:
        left = room.get(vo_of.get(pid, ""))
        if left is None:
            kept.add(pid)
        elif left > 0:
            room[vo_of[pid]] = left - 1
            kept.add(pid)
    return kept
