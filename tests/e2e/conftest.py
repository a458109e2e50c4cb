"""The scenarios' worlds: `launch` (over both databases) and `launch_mariadb` start one, in
each of the two shapes — `in-process` (every component in this process, `e2e_world.running`)
and `processes` (each component its own process from its console script, as the chart deploys
them: `e2e_cluster.running_cluster`). A scenario that passes in one and fails in the other is a
defect of the deployed shape."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import running_cluster
from e2e_world import Launch, World, running

from dxts.core.db import Database


@pytest.fixture(scope="module", params=["in-process", "processes"])
def shape(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _launcher(shape: str, database: Database, url: str, directory: Path) -> Launch:
    def launch(**options: Any) -> AbstractAsyncContextManager[World]:
        if shape == "processes":
            return running_cluster(database, url, directory, **options)
        return running(database, directory, **options)

    return launch


@pytest.fixture
def launch(shape: str, database: Database, db_url: str, tmp_path: Path) -> Launch:
    """`async with launch(null=..., ...) as world:` (the options of `running`)."""
    return _launcher(shape, database, db_url, tmp_path)


@pytest.fixture
def launch_mariadb(shape: str, mariadb: Database, mysql_test_url: str, tmp_path: Path) -> Launch:
    """`launch`, on MariaDB only."""
    return _launcher(shape, mariadb, mysql_test_url, tmp_path)
