"""The local catalogue's watermark misses nothing a concurrent writer commits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.catalogue import db as catalogue_db
from dxts.core.db import Isolation
from dxts.core.ids import new_id

WRITERS = 6
BATCHES = 8
PER_BATCH = 5


def file(writer: int, batch: int, n: int) -> CatalogueFile:
    return CatalogueFile(
        lfn=f"/race/{writer}/{batch}/{n}", size=n, metadata={"stream": "race", "writer": writer}
    )


async def test_a_reader_paging_during_concurrent_registrations_sees_each_file_once(
    catalogue: LocalFileCatalogue,
) -> None:
    done = asyncio.Event()

    async def writer(index: int) -> None:
        for batch in range(BATCHES):
            await catalogue.register(file(index, batch, n) for n in range(PER_BATCH))
            await asyncio.sleep(0)

    async def reader() -> list[str]:
        seen: list[str] = []
        watermark = None
        while True:
            finished = done.is_set()  # read before the query: a final pass after the writers
            page = await catalogue.query({"stream": "race"}, after=watermark, limit=7)
            seen += [f.lfn for f in page.files]
            watermark = page.watermark
            if finished and not page.more:
                return seen

    reading = asyncio.create_task(reader())
    await asyncio.gather(*(writer(i) for i in range(WRITERS)))
    done.set()
    seen = await reading
    expected = {f"/race/{w}/{b}/{n}" for w in range(WRITERS) for b in range(BATCHES)
                for n in range(PER_BATCH)}  # fmt: skip
    assert len(seen) == len(set(seen)) == len(expected)
    assert set(seen) == expected


@pytest.fixture(scope="module")
async def server_catalogue(mysql_test_url: str) -> AsyncIterator[LocalFileCatalogue]:
    catalogue = LocalFileCatalogue(CatalogueSettings(url=mysql_test_url))
    await catalogue.start()
    try:
        yield catalogue
    finally:
        await catalogue.close()


async def waiting_for_a_lock(catalogue: LocalFileCatalogue) -> None:
    """Until a transaction of this test's database is in LOCK WAIT (a state, not a delay).

    InnoDB refreshes its transaction table for information_schema at most every 0.1 s and only
    when read after that, so a faster poll would keep reading the same stale snapshot.
    """
    query = sa.text(
        "SELECT COUNT(*) FROM information_schema.INNODB_TRX t "
        "JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
        "WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()"
    )
    for _ in range(150):
        async with catalogue.database.transaction(Isolation.READ_COMMITTED) as conn:
            if await conn.scalar(query):
                return
        await asyncio.sleep(0.2)
    raise AssertionError("the second registration never waited for the first")


@pytest.mark.mariadb_only
async def test_an_uncommitted_registration_holds_back_later_ones(
    server_catalogue: LocalFileCatalogue,
) -> None:
    """Seqs become visible in order: while registration A is open, B (which would take a
    larger Seq) cannot commit, so no reader can see B, move its watermark past it, and miss A."""
    first = CatalogueFile(lfn="/order/a", size=1, metadata={"stream": "order"})
    second = CatalogueFile(lfn="/order/b", size=2, metadata={"stream": "order"})
    async with server_catalogue.database.transaction(Isolation.READ_COMMITTED) as conn:
        seq = await catalogue_db.allocate_sequence(conn)
        await catalogue_db.insert_files(conn, [(new_id(), first)], seq)
        registering = asyncio.create_task(server_catalogue.register([second]))
        await waiting_for_a_lock(server_catalogue)
        empty = await server_catalogue.query({"stream": "order"})
        assert empty.files == []
        assert not registering.done()
    await registering
    page = await server_catalogue.query({"stream": "order"}, after=empty.watermark)
    assert [f.lfn for f in page.files] == ["/order/a", "/order/b"]
