"""The file catalogue the example extension's plugins are given, on SQLite and on MariaDB."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dxts.core.catalogue import CatalogueSettings, LocalFileCatalogue


@pytest.fixture(scope="module")
async def catalogue(db_url: str) -> AsyncIterator[LocalFileCatalogue]:
    catalogue = LocalFileCatalogue(CatalogueSettings(url=db_url))
    await catalogue.start()
    try:
        yield catalogue
    finally:
        await catalogue.close()
