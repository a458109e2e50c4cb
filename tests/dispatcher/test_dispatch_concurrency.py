"""Four dispatcher replicas, each with its own Database (its own connections), claiming 20,000
parcels side by side on MariaDB against one null adaptor over real gRPC: every parcel is
submitted exactly once, none is lost or claimed twice, and the counters stay exact."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
import sqlalchemy as sa
from dispatch_support import (
    Keys,
    assert_counters_exact,
    dispatcher,
    empty,
    identifiers,
    parcels,
    transformation,
)

from dxts.core.db import Database, Isolation
from dxts.core.ids import id_to_str
from dxts.core.schema import execution
from dxts.core.states import Kind

pytestmark = pytest.mark.mariadb_only

PARCELS = 20_000
REPLICAS = 4
LOOPS_PER_REPLICA = 2


async def test_four_replicas_submit_every_parcel_exactly_once(
    mariadb: Database, mysql_test_url: str, keys: Keys, null_adaptors: Any
) -> None:
    await empty(mariadb)
    tids = [await transformation(mariadb) for _ in range(3)]
    ids: list[bytes] = []
    for i, tid in enumerate(tids):
        ids += await parcels(
            mariadb, PARCELS // 4, transformation_id=tid, inputs_per_parcel=1 if i == 0 else 0
        )
    ids += await parcels(mariadb, PARCELS - len(ids))  # user parcels
    adaptor, address = await null_adaptors(delay_s=3600)

    replicas = []
    for _ in range(REPLICAS):
        database = Database(mysql_test_url)
        await database.start()
        replicas.append(
            (
                database,
                await dispatcher(
                    database,
                    [{"name": "null", "address": address, "kind": "compute"}],
                    keys,
                    claim_batch=100,
                    submit_batch=100,
                ),
            )
        )

    async def loop(component: Any) -> int:
        claimed = 0
        idle = 0
        while idle < 3:  # nothing claimable three times in a row: the rest is others'
            got = await component.dispatcher.dispatch_once(Kind.COMPUTE)
            claimed += got
            idle = 0 if got else idle + 1
        return claimed

    counts = await asyncio.gather(
        *(loop(component) for _, component in replicas for _ in range(LOOPS_PER_REPLICA))
    )
    assert sum(counts) == PARCELS
    assert sum(1 for c in counts if c) > 1  # the work really was shared

    assert adaptor.submits == Counter({id_to_str(p): 1 for p in ids})
    assert adaptor.started == adaptor.submits
    recorded = await identifiers(mariadb, "null")
    assert set(recorded) == set(ids)
    assert len(set(recorded.values())) == PARCELS

    async def by_status(conn: Any) -> dict[str, int]:
        rows = await conn.execute(
            sa.select(execution.parcels.c.Status, sa.func.count()).group_by(
                execution.parcels.c.Status
            )
        )
        return {r[0]: int(r[1]) for r in rows}

    assert await mariadb.run(by_status, isolation=Isolation.READ_COMMITTED) == {"Assigned": PARCELS}
    await assert_counters_exact(mariadb)
    for database, component in replicas:
        await component.stop()
        await database.dispose()
