"""The test harness: one database fixture, parametrised over SQLite and MariaDB.

MariaDB is selected by `DXTS_TEST_MYSQL_URL` (e.g. `mysql+asyncmy://root@127.0.0.1:3306/test`);
each test module gets a fresh database of its own on that server (`dxts_t_<random>`), dropped
afterwards, so test runs and parallel sessions never see each other's rows. Without the variable
the MariaDB half is skipped with a visible reason, unless `CI` is set, where it is an error.
"""

from __future__ import annotations

import asyncio
import os
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from dxts.core.db import Database
from dxts.core.schema import metadata

MYSQL_URL_VARIABLE = "DXTS_TEST_MYSQL_URL"

# Modules that share one outside server run in one worker when the suite runs in parallel
# (`pytest -n 2 --dist loadgroup`, as scripts/test runs it): the single-node Slurm cluster is
# sized for one test's jobs at a time, and a DiracX server takes most of a core to start. Every
# other module is a group of its own, so that its module-scoped fixtures (its database, its
# cluster) are made once.
SHARED_SERVERS = {
    "tests/backends/test_slurm_accounting.py": "slurm",
    "tests/backends/test_slurm_adaptor.py": "slurm",
    "tests/bench/test_slurm_bench.py": "slurm",
    "tests/cli/test_cli_slurm.py": "slurm",
    "tests/backends/test_diracx_adaptor.py": "diracx",
    "tests/cli/test_cli_diracx.py": "diracx",
}
# The conformance suite checks every adaptor in one module: each adaptor's tests go to the group
# of the server it needs (the others to the module's own group).
CONFORMANCE_MODULE = "tests/backends/test_adaptor_conformance.py"
ADAPTOR_SERVERS = {"slurm": "slurm", "diracx": "diracx"}


def pytest_itemcollected(item: pytest.Item) -> None:
    """Give each test the worker group it runs in under pytest-xdist's `loadgroup`, as it is
    collected: the xdist worker reads the groups in its own `pytest_collection_modifyitems`,
    which ran before this project's (a group given there was never seen, and a module's tests
    were spread over both workers, each setting up its module-scoped servers)."""
    module = item.nodeid.split("::", 1)[0]
    group = SHARED_SERVERS.get(module, module)
    if module == CONFORMANCE_MODULE:
        adaptor = item.callspec.params["adaptor"]  # type: ignore[attr-defined]
        group = ADAPTOR_SERVERS.get(adaptor, group)
    item.add_marker(pytest.mark.xdist_group(group))


def mysql_server_url() -> str | None:
    """The MariaDB/MySQL server URL to test against, or None (skip) outside CI."""
    url = os.environ.get(MYSQL_URL_VARIABLE)
    if not url and os.environ.get("CI"):
        raise pytest.UsageError(
            f"CI is set but {MYSQL_URL_VARIABLE} is not: MariaDB tests must run"
        )
    return url


@pytest.fixture(scope="module")
def mysql_test_url() -> Iterator[str]:
    """A fresh, empty MariaDB database for this module; dropped afterwards."""
    server = mysql_server_url()
    if not server:
        pytest.skip(f"MariaDB tests skipped: set {MYSQL_URL_VARIABLE} to run them")
    name = f"dxts_t_{uuid.uuid4().hex[:12]}"
    base = sa.make_url(server)

    async def _do(statement: str) -> None:
        engine = create_async_engine(base, poolclass=sa.pool.NullPool)
        try:
            async with engine.begin() as conn:
                await conn.execute(sa.text(statement))
        finally:
            await engine.dispose()

    async def _drop() -> None:
        # A connection a test forgot to close would make DROP DATABASE wait on its metadata
        # lock forever (the forgetful pool lives in this very process): kill them, and say so.
        engine = create_async_engine(base, poolclass=sa.pool.NullPool)
        try:
            async with engine.begin() as conn:
                leftovers = (
                    await conn.execute(
                        sa.text("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = :db"),
                        {"db": name},
                    )
                ).scalars().all()
                for thread_id in leftovers:
                    try:
                        await conn.execute(sa.text(f"KILL {int(thread_id)}"))
                    except sa.exc.OperationalError as error:
                        # 1094: it closed between the listing and the KILL, which is fine.
                        if getattr(error.orig, "args", (None,))[0] != 1094:
                            raise
                await conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
        finally:
            await engine.dispose()
        if leftovers:
            warnings.warn(
                f"{len(leftovers)} connection(s) to {name} were left open by the tests; "
                "killed before dropping the database",
                stacklevel=1,
            )

    asyncio.run(_do(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_drop())


@pytest.fixture(scope="module")
def sqlite_test_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("sqlite") / "dxts.sqlite"
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(scope="module", params=["sqlite", "mariadb"])
def db_url(request: pytest.FixtureRequest) -> str:
    """An empty database URL, once per backend: every database test runs on both."""
    fixture = "sqlite_test_url" if request.param == "sqlite" else "mysql_test_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture(scope="module")
async def database(db_url: str) -> AsyncIterator[Database]:
    """A started Database on `db_url` with the whole schema created."""
    database = Database(db_url)
    await database.start()
    async with database.engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture(scope="module")
async def mariadb(mysql_test_url: str) -> AsyncIterator[Database]:
    """MariaDB only: for what SQLite cannot show (locking, SKIP LOCKED, isolation)."""
    database = Database(mysql_test_url)
    await database.start()
    async with database.engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    try:
        yield database
    finally:
        await database.dispose()


async def truncate_all(database: Database) -> None:
    """Empty every table (children first), for tests that need a clean slate mid-module."""
    async with database.engine.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            await conn.execute(table.delete())
