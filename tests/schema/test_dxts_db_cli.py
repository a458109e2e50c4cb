"""`dxts-db`, run as the installed console script the Helm job and operators run."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import create_async_engine
from typer.testing import CliRunner

from dxts.core import db as db_module
from dxts.core.migrations.api import alembic_config
from dxts.core.migrations.cli import app

DXTS_DB = Path(sys.executable).parent / "dxts-db"
HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def dxts_db(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert DXTS_DB.exists(), f"{DXTS_DB} is not installed: run scripts/dev-install"
    environment = {k: v for k, v in os.environ.items() if k != "DXTS_DB_URL"} | (env or {})
    return subprocess.run(
        [str(DXTS_DB), *args], capture_output=True, text=True, env=environment, timeout=120
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dxts-db: error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def table_names(url: str) -> list[str]:
    async def names() -> list[str]:
        engine = create_async_engine(url, poolclass=sa.pool.NullPool)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
        finally:
            await engine.dispose()

    return asyncio.run(names())


@pytest.mark.parametrize("backend", ["sqlite", "mariadb"])
def test_upgrade_then_current(backend: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("sqlite_test_url" if backend == "sqlite" else "mysql_test_url")

    before = dxts_db("current", "--url", url)
    assert before.returncode == 0, before.stderr
    assert before.stdout.strip() == f"empty (no dxts revision applied; head is {HEAD})"

    upgraded = dxts_db("upgrade", "--url", url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert upgraded.stdout.strip() == f"database at {HEAD} (head)"
    assert "Running upgrade  -> 0001" in upgraded.stderr  # the job log shows what ran
    assert "Traceback" not in upgraded.stderr
    assert {"Inputs", "Parcels", "Workgraphs", "alembic_version"} <= set(table_names(url))

    now = dxts_db("current", "--url", url)
    assert now.returncode == 0, now.stderr
    assert now.stdout.strip() == f"{HEAD} (head)"

    again = dxts_db("upgrade", "--url", url)
    assert again.returncode == 0, again.stderr
    assert "Running upgrade" not in again.stderr


def test_url_defaults_to_the_dxts_db_url_setting(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'from-env.sqlite'}"
    result = dxts_db("upgrade", env={"DXTS_DB_URL": url})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "from-env.sqlite").exists()
    assert dxts_db("current", env={"DXTS_DB_URL": url}).stdout.strip() == f"{HEAD} (head)"


@pytest.mark.parametrize(
    ("url", "fragments"),
    [
        ("not-a-url", ["is not a database URL"]),
        ("postgresql+asyncpg://u@127.0.0.1/x", ["unsupported database"]),
        ("mysql+asyncmy://root@127.0.0.1:1/dxts", ["cannot reach the database", "127.0.0.1"]),
        ("sqlite+aiosqlite:////nonexistent-dir/dxts.sqlite", ["unable to open database file"]),
    ],
)
def test_bad_url_is_one_line_error(url: str, fragments: list[str]) -> None:
    assert_one_line_error(dxts_db("upgrade", "--url", url), *fragments)


def test_current_with_bad_url_is_one_line_error() -> None:
    assert_one_line_error(dxts_db("current", "--url", "not-a-url"), "is not a database URL")


def test_unknown_database_on_the_server_is_one_line_error(mysql_test_url: str) -> None:
    missing = sa.make_url(mysql_test_url).set(database="dxts_no_such_database")
    result = dxts_db("upgrade", "--url", missing.render_as_string(hide_password=False))
    assert_one_line_error(result, "Unknown database")


def test_unknown_revision_is_one_line_error(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
    result = dxts_db("upgrade", "--url", url, "--revision", "nosuchrevision")
    assert_one_line_error(result, "nosuchrevision")


def test_too_old_server_is_refused_before_any_ddl(
    mysql_test_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's answer to SELECT VERSION() is replaced by an old MariaDB's; the real
    version check then has to stop the upgrade before it creates anything."""
    real_check = db_module.check_server_version
    monkeypatch.setattr(
        db_module, "check_server_version", lambda _version: real_check("10.5.23-MariaDB")
    )
    url = sa.make_url(mysql_test_url).set(database=f"dxts_t_old_{uuid.uuid4().hex[:8]}")
    # The database must exist for the probe to reach the version check at all.
    server = sa.make_url(mysql_test_url).set(database=None)

    async def ddl(statement: str) -> None:
        engine = create_async_engine(server, poolclass=sa.pool.NullPool)
        try:
            async with engine.begin() as conn:
                await conn.execute(sa.text(statement))
        finally:
            await engine.dispose()

    asyncio.run(ddl(f"CREATE DATABASE IF NOT EXISTS `{url.database}`"))
    try:
        rendered = url.render_as_string(hide_password=False)
        result = CliRunner().invoke(app, ["upgrade", "--url", rendered])
        assert result.exit_code == 1
        assert result.stderr.strip().splitlines() == [
            "dxts-db: error: MariaDB 10.5.23-MariaDB is too old: dxts needs MariaDB 10.6 or "
            "newer (FOR UPDATE SKIP LOCKED)"
        ]
        assert table_names(rendered) == []
    finally:
        asyncio.run(ddl(f"DROP DATABASE IF EXISTS `{url.database}`"))
