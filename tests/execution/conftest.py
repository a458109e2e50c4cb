"""Fixtures the execution tests share: a local file catalogue per module and database, the
built-in plugins wired to it (with an in-memory definition side), and an empty execution side
with one transformation (recording_world's) per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import runner_support
from definition_double import InMemoryTransformations
from recording_world import World, empty, transformation

from dxts.core.catalogue import CatalogueSettings
from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.db import Database
from dxts.core.plugins import Registry
from dxts.execution.component import install_providers
from dxts.execution.logic.transformations import ActiveSnapshot


@pytest.fixture(scope="module")
async def catalogue(
    db_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LocalFileCatalogue]:
    """A catalogue of its own per database the module runs on."""
    path = tmp_path_factory.mktemp("catalogue") / "catalogue.sqlite"
    catalogue = LocalFileCatalogue(CatalogueSettings(url=f"sqlite+aiosqlite:///{path}"))
    await catalogue.start()
    try:
        yield catalogue
    finally:
        await catalogue.close()


@pytest.fixture(scope="module")
def definitions(db_url: str) -> InMemoryTransformations:
    return InMemoryTransformations()


@pytest.fixture(scope="module")
def plugins(
    database: Database, catalogue: LocalFileCatalogue, definitions: InMemoryTransformations
) -> Registry:
    """The built-in plugins, their providers installed over this database and catalogue."""
    registry = runner_support.builtins()
    # Listed afresh on every lookup, as a sweep's refresh would make it.
    snapshot = ActiveSnapshot(definitions, max_age_s=0)
    install_providers(registry.providers, database, snapshot, catalogue, watermark_interval_s=0)
    registry.check()
    return registry


@pytest.fixture
async def world(database: Database) -> World:
    await empty(database)
    return await transformation(database)
