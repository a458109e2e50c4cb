"""The small SQLite database a stateful adaptor keeps in its work directory (`local`, `slurm`):
what makes its Submit idempotent across restarts. Each adaptor defines its own tables (their
own metadata, not part of the dxts schema); this base holds what they share — opening the
database, one writer per transaction, and the keys cancelled before they were ever accepted,
which are refused for good.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import Database, Isolation

IMMEDIATE = Isolation.SERIALIZABLE  # SQLite: every transaction is one writer at a time


def state_url(work_dir: Path) -> str:
    """The URL of an adaptor's state database in its work directory."""
    return f"sqlite+aiosqlite:///{work_dir / 'state.sqlite'}"


def cancelled_keys_table(name: str, metadata: sa.MetaData) -> sa.Table:
    """An adaptor's table of parcel ids cancelled before they were accepted."""
    return sa.Table(name, metadata, sa.Column("ParcelID", sa.String(36), primary_key=True))


def jobs_named(
    jobs: sa.Table, identifiers: Sequence[str], parcel_ids: Sequence[str]
) -> sa.ColumnElement[bool]:
    """An adaptor's jobs by their identifiers when any are given, else by their parcel ids."""
    if identifiers:
        return jobs.c.Identifier.in_(list(identifiers))
    return jobs.c.ParcelID.in_(list(parcel_ids))


def now() -> datetime:
    """The current UTC time as the adaptors' SQLite columns hold it (naive)."""
    return datetime.now(UTC).replace(tzinfo=None)


class AdaptorStore:
    """An adaptor's state database at `url`, holding `metadata`'s tables (created on start)."""

    def __init__(self, url: str, metadata: sa.MetaData, cancelled_keys: sa.Table) -> None:
        self.database = Database(url)
        self.metadata = metadata
        self.cancelled_keys = cancelled_keys

    async def start(self) -> None:
        await self.database.start()
        await self._run(lambda conn: conn.run_sync(self.metadata.create_all))

    async def close(self) -> None:
        await self.database.dispose()

    async def _run(self, work: Any) -> Any:
        return await self.database.run(work, isolation=IMMEDIATE)

    async def cancelled_among(self, conn: AsyncConnection, parcel_ids: Sequence[str]) -> set[str]:
        """Those of `parcel_ids` cancelled before they were accepted (inside a transaction)."""
        query = sa.select(self.cancelled_keys.c.ParcelID).where(
            self.cancelled_keys.c.ParcelID.in_(list(parcel_ids))
        )
        return {row[0] for row in await conn.execute(query)}

    async def tombstoned(self, parcel_ids: Sequence[str]) -> set[str]:
        return await self._run(lambda conn: self.cancelled_among(conn, parcel_ids))

    async def tombstone(self, parcel_ids: Sequence[str]) -> None:
        """Refuse these keys for good (they were cancelled before being accepted)."""

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sqlite.insert(self.cancelled_keys).on_conflict_do_nothing(),
                [{"ParcelID": p} for p in parcel_ids],
            )

        if parcel_ids:
            await self._run(work)
