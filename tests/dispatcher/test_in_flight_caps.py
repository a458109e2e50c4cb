"""The cap on each VO's parcels in flight, enforced when parcels are claimed: a VO at its cap is
not claimed and does not hold the others up (on SQLite and MariaDB), and concurrent claimers
never take the same room twice (MariaDB, several replicas with their own connections)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from dispatch_support import Keys, dispatcher, empty, parcels, statuses, transformation

from dxts.core.db import Database
from dxts.core.states import Kind
from dxts.dispatcher.settings import DispatcherSettings


async def drain(component: Any) -> int:
    total = 0
    while claimed := await component.dispatcher.dispatch_once(Kind.COMPUTE):
        total += claimed
    return total


async def test_a_vo_at_its_cap_does_not_block_another(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    # lhcb's parcels come first in key order: a claim that took them and then dropped them
    # would starve belle.
    lhcb = await parcels(database, 12, transformation_id=await transformation(database))
    lhcb_users = await parcels(database, 3)  # user parcels of lhcb count towards its cap
    belle = await parcels(database, 8, transformation_id=await transformation(database, vo="belle"))
    unlimited = await parcels(database, 6, vo="dune")
    _, address = await null_adaptors(delay_s=3600)  # accepted parcels stay Assigned
    component = await dispatcher(
        database,
        [{"name": "null", "address": address, "kind": "compute"}],
        keys,
        claim_batch=4,
        vo_in_flight_cap=5,
        vo_in_flight_caps={"belle": 7, "dune": 100},
    )
    await drain(component)
    found = await statuses(database, lhcb + lhcb_users + belle + unlimited)
    by_vo = {
        vo: Counter(found[p] for p in ids)
        for vo, ids in (("lhcb", lhcb + lhcb_users), ("belle", belle), ("dune", unlimited))
    }
    assert by_vo == {
        "lhcb": Counter({"Assigned": 5, "Unassigned": 10}),
        "belle": Counter({"Assigned": 7, "Unassigned": 1}),
        "dune": Counter({"Assigned": 6}),
    }
    # Nothing more while the VOs stay at their caps; a cap raised makes room at once.
    assert await drain(component) == 0
    await component.stop()
    raised = await dispatcher(
        database,
        [{"name": "null", "address": address, "kind": "compute"}],
        keys,
        vo_in_flight_cap=9,
    )
    assert await drain(raised) == 4 + 1
    await raised.stop()


def test_caps_are_counts_of_parcels() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        DispatcherSettings(vo_in_flight_caps={"lhcb": -1})
    assert DispatcherSettings().vo_in_flight_cap is None


@pytest.mark.mariadb_only
async def test_concurrent_claimers_share_a_vo_cap_exactly(
    mariadb: Database, mysql_test_url: str, keys: Keys, null_adaptors: Any
) -> None:
    await empty(mariadb)
    tids = [await transformation(mariadb) for _ in range(2)]
    ids = [p for tid in tids for p in await parcels(mariadb, 300, transformation_id=tid)]
    others = await parcels(mariadb, 40, transformation_id=await transformation(mariadb, vo="b"))
    _, address = await null_adaptors(delay_s=3600)
    replicas = []
    for _ in range(4):
        database = Database(mysql_test_url)
        await database.start()
        component = await dispatcher(
            database,
            [{"name": "null", "address": address, "kind": "compute"}],
            keys,
            claim_batch=7,
            vo_in_flight_cap=50,
        )
        replicas.append((database, component))

    await asyncio.gather(*(drain(c) for _, c in replicas for _ in range(2)))
    # A loop stops at its first empty claim, which a claim whose room another took can be:
    # one more drain takes what is left.
    await drain(replicas[0][1])
    found = await statuses(mariadb, ids + others)
    assert Counter(found[p] for p in ids) == Counter({"Assigned": 50, "Unassigned": 550})
    assert Counter(found[p] for p in others) == Counter({"Assigned": 40})
    for database, component in replicas:
        await component.stop()
        await database.dispose()
