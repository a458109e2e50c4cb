"""Migration 0007 keeps every identifier already recorded: the rows of LocalIDs, NullIDs and
SlurmIDs, and those the DiracX adaptor wrote in DiracXIDs, move to BackendIDs under their
adaptor type, and back again on a downgrade (SQLite and MariaDB)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import command

from dxts.core.migrations import upgrade
from dxts.core.migrations.api import alembic_config, run_on_connection

# Former table, its identifier column, the adaptor type its rows belong to.
FORMER = [
    ("LocalIDs", "LocalID", "local"),
    ("NullIDs", "NullID", "null"),
    ("SlurmIDs", "SlurmID", "slurm"),
    ("DiracXIDs", "SlotID", "diracx"),
]
PARCELS = {adaptor: (uuid.uuid4().bytes, uuid.uuid4().bytes) for _, _, adaptor in FORMER}


def _seed(connection: sa.Connection) -> None:
    for table, column, adaptor in FORMER:
        parcel, identifier = PARCELS[adaptor]
        connection.execute(
            sa.table(
                "Parcels",
                sa.column("ParcelID"),
                sa.column("Kind"),
                sa.column("Status"),
                sa.column("Backend"),
                sa.column("UpdatedAt"),
            ).insert(),
            {
                "ParcelID": parcel,
                "Kind": "Compute",
                "Status": "Assigned",
                "Backend": adaptor,
                "UpdatedAt": datetime(2026, 12, 3, 12),
            },
        )
        connection.execute(
            sa.table(table, sa.column("ParcelID"), sa.column(column)).insert(),
            {"ParcelID": parcel, column: identifier},
        )


def _pairs(connection: sa.Connection, table: str, *columns: str) -> set[tuple[Any, ...]]:
    rows = connection.execute(
        sa.select(*(sa.column(c) for c in columns)).select_from(sa.table(table))
    )
    return {
        tuple(bytes(v) if isinstance(v, bytes | bytearray | memoryview) else v for v in r)
        for r in rows
    }


def _former(connection: sa.Connection) -> dict[str, set[tuple[Any, ...]]]:
    return {
        adaptor: _pairs(connection, table, "ParcelID", column) for table, column, adaptor in FORMER
    }


def _downgrade(connection: sa.Connection) -> Any:
    command.downgrade(alembic_config(connection), "0005")


async def test_identifiers_move_to_backend_ids_and_back(db_url: str) -> None:
    await upgrade(db_url, "0005")
    await run_on_connection(db_url, _seed)
    await upgrade(db_url)
    moved = await run_on_connection(
        db_url, lambda c: _pairs(c, "BackendIDs", "ParcelID", "Adaptor", "Identifier")
    )
    assert moved == {(p, adaptor, i) for adaptor, (p, i) in PARCELS.items()}
    left = await run_on_connection(db_url, lambda c: _pairs(c, "DiracXIDs", "ParcelID"))
    assert left == set()  # the spec's table stays, emptied

    await run_on_connection(db_url, _downgrade)
    assert await run_on_connection(db_url, _former) == {
        adaptor: {pair} for adaptor, pair in PARCELS.items()
    }
    await upgrade(db_url)  # the module's database is left at head, as the others expect
