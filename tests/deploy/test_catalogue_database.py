"""The chart's default catalogue: without a catalogue Secret of its own, DXTS_CATALOGUE_URL is the
dxts database's URL. The catalogue's tables then live beside dxts's own, which the schema
migration neither sees nor disturbs."""

from __future__ import annotations

from dxts.core.catalogue import CatalogueFile, CatalogueSettings, open_catalogue
from dxts.core.catalogue.schema import catalogue_metadata
from dxts.core.migrations import upgrade
from dxts.core.schema import metadata


async def test_the_catalogue_shares_the_migrated_dxts_database(db_url: str) -> None:
    assert not set(metadata.tables) & set(catalogue_metadata.tables)
    assert (await upgrade(db_url)).at_head
    catalogue = await open_catalogue(CatalogueSettings(url=db_url))
    try:
        file = CatalogueFile(lfn="/dxts/t/p/out.root", size=7, replicas=("LOCAL",))
        assert (await catalogue.register([file])).files == 1
        assert await catalogue.files([file.lfn]) == {file.lfn: file}
    finally:
        await catalogue.close()
    # An upgrade after the catalogue made its tables (the next helm upgrade) is a no-op.
    again = await upgrade(db_url)
    assert again.at_head and not again.unknown
