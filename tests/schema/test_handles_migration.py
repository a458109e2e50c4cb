"""Migration 0010 numbers the parcels already there: after the upgrade every parcel has a handle
number, in id (creation) order, and the next parcel created takes a number after them; a
downgrade drops the handle tables (SQLite and MariaDB)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import command

from dxts.core.migrations import upgrade
from dxts.core.migrations.api import alembic_config, run_on_connection

PARCELS = sorted(uuid.uuid4().bytes for _ in range(5))
PARCEL_TABLE = sa.table(
    "Parcels",
    sa.column("ParcelID"),
    sa.column("Kind"),
    sa.column("Status"),
    sa.column("UpdatedAt"),
)


def _parcel(parcel_id: bytes) -> dict[str, Any]:
    return {
        "ParcelID": parcel_id,
        "Kind": "Compute",
        "Status": "Unassigned",
        "UpdatedAt": datetime(2026, 12, 3, 12),
    }


def _seed(connection: sa.Connection) -> None:
    connection.execute(PARCEL_TABLE.insert(), [_parcel(p) for p in reversed(PARCELS)])


def _numbers(connection: sa.Connection) -> list[tuple[int, bytes]]:
    rows = connection.execute(
        sa.select(sa.column("Number"), sa.column("ParcelID"))
        .select_from(sa.table("ParcelHandles"))
        .order_by(sa.column("Number"))
    )
    return [(int(n), bytes(p)) for n, p in rows]


def _add_one(connection: sa.Connection) -> bytes:
    """A parcel created after the upgrade, numbered as the services number them."""
    parcel = uuid.uuid4().bytes
    connection.execute(PARCEL_TABLE.insert(), [_parcel(parcel)])
    connection.execute(
        sa.table("ParcelHandles", sa.column("ParcelID")).insert(), [{"ParcelID": parcel}]
    )
    return parcel


def _tables(connection: sa.Connection) -> set[str]:
    return set(sa.inspect(connection).get_table_names())


async def test_the_parcels_already_there_are_numbered_in_creation_order(db_url: str) -> None:
    await upgrade(db_url, "0009")
    await run_on_connection(db_url, _seed)
    await upgrade(db_url)
    numbered = await run_on_connection(db_url, _numbers)
    assert [p for _, p in numbered] == PARCELS
    assert len({n for n, _ in numbered}) == len(PARCELS)
    newest = await run_on_connection(db_url, _add_one)
    after = await run_on_connection(db_url, _numbers)
    # After them (MariaDB's INSERT ... SELECT reserves numbers in chunks: there may be a gap).
    assert after[-1][1] == newest and after[-1][0] > max(n for n, _ in numbered)
    await run_on_connection(db_url, lambda c: command.downgrade(alembic_config(c), "0009"))
    handles = {"WorkgraphHandles", "TransformationHandles", "ParcelHandles"}
    assert not handles & await run_on_connection(db_url, _tables)
