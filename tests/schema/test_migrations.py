"""The migrations create exactly the schema the code declares, on SQLite and MariaDB.

Two independent proofs: Alembic's own autogenerate comparison of `metadata` with an upgraded
database finds nothing to do, and the DDL the server reports after `upgrade` is the DDL it
reports after `metadata.create_all` (columns in order; keys, constraints and indexes as sets).
"""

from __future__ import annotations

import io
import re

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from dxts.core.migrations import current, upgrade
from dxts.core.migrations.api import alembic_config, context_options, run_on_connection
from dxts.core.schema import metadata

VERSION_TABLE = "alembic_version"


@pytest.fixture(scope="module")
async def upgraded(db_url: str) -> str:
    revisions = await upgrade(db_url)
    assert revisions.at_head, revisions.describe()
    return db_url


def _diff(connection: sa.Connection, target: sa.MetaData) -> list[object]:
    context = MigrationContext.configure(connection, opts=context_options(connection))
    return list(compare_metadata(context, target))


async def test_upgrade_reaches_head_and_is_idempotent(upgraded: str) -> None:
    before = await current(upgraded)
    assert before.current and before.current == before.heads
    again = await upgrade(upgraded)
    assert again.at_head
    assert again.current == before.current


async def test_autogenerate_finds_no_difference(upgraded: str) -> None:
    assert await run_on_connection(upgraded, lambda c: _diff(c, metadata)) == []


async def test_autogenerate_comparison_sees_a_difference(upgraded: str) -> None:
    """The comparison above is not vacuous: a column the database lacks is reported."""
    changed = sa.MetaData(naming_convention=metadata.naming_convention)
    for table in metadata.sorted_tables:
        table.to_metadata(changed)
    changed.tables["Inputs"].append_column(sa.Column("Extra", sa.Integer(), nullable=True))
    diff = await run_on_connection(upgraded, lambda c: _diff(c, changed))
    assert [(d[0], d[2], d[3].name) for d in diff] == [("add_column", "Inputs", "Extra")]  # type: ignore[index]


def _split_top_level(body: str) -> list[str]:
    """Comma-separated items of a CREATE TABLE body, ignoring commas inside (...) and quotes."""
    items, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(body):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    items.append(body[start:].strip())
    return [item for item in items if item]


def _normalise_create(sql: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(column definitions in order, other definitions sorted, table options) of a CREATE TABLE."""
    sql = re.sub(r"\s+", " ", sql)
    start, end = sql.index("("), sql.rindex(")")
    items = _split_top_level(sql[start + 1 : end])
    columns = tuple(item for item in items if item[0] in '`"')
    others = tuple(sorted(item for item in items if item[0] not in '`"'))
    options = re.sub(r" AUTO_INCREMENT=\d+", "", sql[end + 1 :]).strip()
    return columns, others, options


def _snapshot(connection: sa.Connection) -> dict[str, object]:
    """Everything the server says about each table except alembic's own."""
    if connection.dialect.name == "sqlite":
        rows = connection.exec_driver_sql(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        ).all()
        snapshot: dict[str, object] = {}
        for kind, name, table, sql in rows:
            if table == VERSION_TABLE:
                continue
            snapshot[f"{kind} {name}"] = _normalise_create(sql) if kind == "table" else sql
        return snapshot
    names = sa.inspect(connection).get_table_names()
    return {
        name: _normalise_create(connection.exec_driver_sql(f"SHOW CREATE TABLE `{name}`").one()[1])
        for name in names
        if name != VERSION_TABLE
    }


def _downgrade_to_base(connection: sa.Connection) -> list[str]:
    command.downgrade(alembic_config(connection), "base")
    return sa.inspect(connection).get_table_names()


async def test_upgrade_creates_what_create_all_creates(upgraded: str) -> None:
    migrated = await run_on_connection(upgraded, _snapshot)
    tables = [name.removeprefix("table ") for name in migrated if not name.startswith("index ")]
    assert sorted(tables) == sorted(metadata.tables)

    # The baseline's downgrade removes everything it created...
    assert await run_on_connection(upgraded, _downgrade_to_base) == [VERSION_TABLE]

    # ...and create_all on the now empty database yields the same DDL.
    def create_all_then_snapshot(connection: sa.Connection) -> dict[str, object]:
        metadata.create_all(connection)
        snapshot = _snapshot(connection)
        metadata.drop_all(connection)
        return snapshot

    try:
        created = await run_on_connection(upgraded, create_all_then_snapshot)
    finally:
        await upgrade(upgraded)
    assert sorted(created) == sorted(migrated)
    for name in migrated:
        assert created[name] == migrated[name], name


def test_offline_sql_renders_the_mariadb_ddl() -> None:
    """`alembic -c .../alembic.ini upgrade head --sql` writes the DDL for a DBA to review,
    without connecting (the URL's server does not exist)."""
    config = alembic_config()
    config.set_main_option("sqlalchemy.url", "mysql+asyncmy://nobody@127.0.0.1:1/dxts")
    config.output_buffer = io.StringIO()
    command.upgrade(config, "head", sql=True)
    sql = config.output_buffer.getvalue()
    assert "CREATE TABLE `Inputs`" in sql
    assert "`LFN` VARCHAR(512) COLLATE utf8mb4_bin" in sql
    assert "ON DELETE CASCADE" in sql
    assert "INSERT INTO alembic_version" in sql
