"""The tests' definition service: `ActiveTransformations` over records the test sets."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable
from typing import Any

import sqlalchemy as sa

from dxts.core.db import Database, Isolation
from dxts.core.errors import NotFound
from dxts.core.ids import id_to_str
from dxts.core.schema.definition import transformations
from dxts.core.states import TransformationStatus
from dxts.execution.logic.transformations import ActiveTransformation, Description


class InMemoryTransformations:
    """Records set by the test; every caller sees every one.

    With a `database`, the operator's switch (FeederEnabled) is read back from the
    Transformations rows on each `active()`, as the definition service would return it.
    """

    def __init__(
        self, records: Iterable[ActiveTransformation] = (), *, database: Database | None = None
    ) -> None:
        self.records = {record.id: record for record in records}
        self.database = database

    def put(self, record: ActiveTransformation) -> None:
        self.records[record.id] = record

    def update(self, transformation_id: bytes, **changes: Any) -> ActiveTransformation:
        record = dataclasses.replace(self.records[transformation_id], **changes)
        self.records[transformation_id] = record
        return record

    async def active(self) -> list[ActiveTransformation]:
        if self.database is not None:
            await self._read_back(self.database)
        return [
            record
            for record in self.records.values()
            if record.status is TransformationStatus.ACTIVE
        ]

    async def listed(self, transformation_ids: Collection[bytes]) -> list[ActiveTransformation]:
        if self.database is not None:
            await self._read_back(self.database)
        return [self.records[tid] for tid in transformation_ids if tid in self.records]

    async def _read_back(self, database: Database) -> None:
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            rows = await conn.execute(
                sa.select(
                    transformations.c.TransformationID,
                    transformations.c.FeederEnabled,
                ).where(transformations.c.TransformationID.in_(list(self.records)))
            )
            for row in rows:
                self.update(bytes(row.TransformationID), feeder_enabled=bool(row.FeederEnabled))

    async def describe(self, transformation_id: bytes, *, token: str | None) -> Description:
        record = self.records.get(transformation_id)
        if record is None:
            raise NotFound("transformation", id_to_str(transformation_id))
        return Description(record.id, record.vo, record.owner_sub, record.status)

    async def describe_many(
        self, transformation_ids: Collection[bytes], *, token: str | None
    ) -> list[Description]:
        return [await self.describe(tid, token=token) for tid in transformation_ids]
