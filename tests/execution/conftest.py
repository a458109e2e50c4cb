"""Fixtures the execution tests share: a local file catalogue per module, and an empty
execution side with one transformation (recording_world's) per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from recording_world import World, empty, transformation

from dxts.core.catalogue import CatalogueSettings
from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.db import Database


@pytest.fixture(scope="module")
async def catalogue(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalFileCatalogue]:
    path = tmp_path_factory.mktemp("catalogue") / "catalogue.sqlite"
    catalogue = LocalFileCatalogue(CatalogueSettings(url=f"sqlite+aiosqlite:///{path}"))
    await catalogue.start()
    yield catalogue
    await catalogue.close()


@pytest.fixture
async def world(database: Database) -> World:
    await empty(database)
    return await transformation(database)
