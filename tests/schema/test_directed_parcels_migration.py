"""Migration 0011 moves the directions already recorded in Parcels.Backend into DirectedParcels:
an Unassigned parcel's backend and a recovery parcel's become its direction, with its
Parcels.Backend cleared; a parcel reserved or further on keeps the backend it was reserved for.
A downgrade writes the directions back and drops the table (SQLite and MariaDB)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import command

from dxts.core.migrations import upgrade
from dxts.core.migrations.api import alembic_config, run_on_connection

PARCEL_TABLE = sa.table(
    "Parcels",
    sa.column("ParcelID"),
    sa.column("Kind"),
    sa.column("Status"),
    sa.column("Backend"),
    sa.column("UpdatedAt"),
)
# ParcelID → (Status, Backend) before the upgrade.
BEFORE = {
    uuid.uuid4().bytes: ("Unassigned", "slurm"),  # directed by a packer
    uuid.uuid4().bytes: ("Unassigned", None),  # the dispatcher's policy will place it
    uuid.uuid4().bytes: ("Assigned", "local"),  # reserved for its backend
    uuid.uuid4().bytes: ("Done", "recovery"),  # a split's recovery parcel
}


def _seed(connection: sa.Connection) -> None:
    connection.execute(
        PARCEL_TABLE.insert(),
        [
            {
                "ParcelID": parcel_id,
                "Kind": "Compute",
                "Status": status,
                "Backend": backend,
                "UpdatedAt": datetime(2026, 12, 4, 9),
            }
            for parcel_id, (status, backend) in BEFORE.items()
        ],
    )


def _backends(connection: sa.Connection) -> dict[bytes, Any]:
    rows = connection.execute(sa.select(PARCEL_TABLE.c.ParcelID, PARCEL_TABLE.c.Backend))
    return {bytes(p): b for p, b in rows}


def _directions(connection: sa.Connection) -> dict[bytes, str]:
    rows = connection.execute(
        sa.select(sa.column("ParcelID"), sa.column("Backend")).select_from(
            sa.table("DirectedParcels")
        )
    )
    return {bytes(p): b for p, b in rows}


async def test_the_directions_move_to_their_own_table_and_back(db_url: str) -> None:
    await upgrade(db_url, "0010")
    await run_on_connection(db_url, _seed)
    await upgrade(db_url)
    directed, free, assigned, recovery = BEFORE
    assert await run_on_connection(db_url, _directions) == {directed: "slurm", recovery: "recovery"}
    assert await run_on_connection(db_url, _backends) == {
        directed: None,
        free: None,
        assigned: "local",
        recovery: None,
    }
    await run_on_connection(db_url, lambda c: command.downgrade(alembic_config(c), "0010"))
    assert await run_on_connection(db_url, _backends) == {p: b for p, (_, b) in BEFORE.items()}
    tables = await run_on_connection(db_url, lambda c: set(sa.inspect(c).get_table_names()))
    assert "DirectedParcels" not in tables
