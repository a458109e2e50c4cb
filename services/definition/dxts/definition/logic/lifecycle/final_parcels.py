"""What a Finalizing action's last parcel needs from the definition side before execution
creates it (`FinalParcels`, over gRPC in `edge.execution_client`): the transformation's owner,
whose parcel it is, and its process, stored content-addressed like a job's so that the
parcel's ProcessID names a stored process before the parcel exists."""

from __future__ import annotations

import uuid
from typing import Any

from dxts.core import content_store as store
from dxts.core.db import Database, Isolation, Transaction
from dxts.core.errors import NotFound
from dxts.definition.store import transformations as transformations_db


async def owner_and_process(
    database: Database, transformation_id: uuid.UUID, process: dict[str, Any]
) -> tuple[str, str, bytes]:
    """(VO, Sub, ProcessID) for a parcel of the transformation's owner running `process`."""

    async def work(conn: Transaction) -> tuple[str, str, bytes]:
        owner = await transformations_db.transformation_owner(conn, transformation_id.bytes)
        if owner is None:
            raise NotFound("transformation", str(transformation_id))
        (process_id,) = await store.put_processes(conn, [process])
        return owner.vo, owner.sub, process_id

    return await database.run(work, isolation=Isolation.READ_COMMITTED)
