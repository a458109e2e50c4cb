"""Running the Alembic migrations from Python: what `dxts-db`, `dxts up` and the tests call.

The functions are coroutines, awaited on the caller's event loop (the CLI wraps them in
`asyncio.run`). Each one first starts a `dxts.core.db.Database` on the URL, so an unreachable
database or a server too old for dxts (MariaDB < 10.6, MySQL < 8.0) is refused with
`Unavailable` before any DDL runs, then hands Alembic one connection that is already inside a
transaction: env.py runs inside `AsyncConnection.run_sync` and never starts a loop of its own.

MariaDB/MySQL commit every DDL statement implicitly, so a revision that fails leaves the ones
before it applied and recorded, and re-running `upgrade` resumes from there. On SQLite the whole
upgrade is one transaction, run with foreign keys off as SQLite's procedure for rebuilding a
table (Alembic's batch mode) requires; `PRAGMA foreign_key_check` must come back empty before it
commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition
from dxts.core.schema import metadata

T = TypeVar("T")

MIGRATIONS_DIR = Path(__file__).parent
ALEMBIC_INI = MIGRATIONS_DIR / "alembic.ini"


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """The packaged Alembic configuration, carrying `connection` for env.py when given."""
    config = Config(str(ALEMBIC_INI))
    config.attributes["connection"] = connection
    return config


def context_options(connection: sa.Connection) -> dict[str, Any]:
    """How Alembic compares and alters the schema; env.py and the schema tests share it.

    SQLite cannot ALTER most things, so there every change is rendered as a batch (copy the
    table, swap it in).
    """
    return {
        "target_metadata": metadata,
        "render_as_batch": connection.dialect.name == "sqlite",
        "compare_type": True,
        "compare_server_default": _compare_server_default,
    }


_BOOLEAN_SPELLINGS = {"1": True, "true": True, "0": False, "false": False}


def _compare_server_default(
    context: MigrationContext,
    inspected_column: sa.Column[Any],
    metadata_column: sa.Column[Any],
    inspected_default: str | None,
    metadata_default: Any,
    rendered_metadata_default: str | None,
) -> bool | None:
    """Boolean defaults by value: the database reports `DEFAULT TRUE` back as 1 (MariaDB) or
    as `(true)` (SQLite), and Alembic would otherwise see a change in every comparison. None
    leaves every other default to Alembic's own comparison."""
    if not isinstance(metadata_column.type, sa.Boolean):
        return None
    found, wanted = (
        _BOOLEAN_SPELLINGS.get((text or "").strip("'\"() ").lower())
        for text in (inspected_default, rendered_metadata_default)
    )
    if found is None or wanted is None:
        return None
    return found != wanted


@dataclass(frozen=True)
class Revisions:
    """Where a database stands against the revisions this code ships."""

    current: tuple[str, ...]  # empty: no dxts revision applied yet
    heads: tuple[str, ...]
    unknown: tuple[str, ...] = ()  # applied, but not in this code (a newer dxts migrated it)

    @property
    def at_head(self) -> bool:
        return set(self.current) == set(self.heads)

    def describe(self) -> str:
        """One line for an operator."""
        heads = ", ".join(self.heads)
        if self.unknown:
            return (
                f"{', '.join(self.current)} (unknown to this dxts, whose head is {heads}: "
                "the database was migrated by a newer version)"
            )
        if not self.current:
            return f"empty (no dxts revision applied; head is {heads})"
        if self.at_head:
            return f"{', '.join(self.current)} (head)"
        return f"{', '.join(self.current)} (behind: head is {heads}; run dxts-db upgrade)"


async def run_on_connection(url: str, work: Callable[[sa.Connection], T]) -> T:
    """Check the server, then run `work` on one connection inside one transaction."""
    database = Database(url)
    await database.start()
    try:
        if database.is_sqlite:
            async with database.engine.connect() as conn:
                return await conn.run_sync(_sqlite_transaction, work)
        # Migrations take no row locks worth reasoning about; READ COMMITTED is the cheapest.
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            return await conn.run_sync(work)
    finally:
        await database.dispose()


def _sqlite_transaction(connection: sa.Connection, work: Callable[[sa.Connection], T]) -> T:
    # PRAGMA foreign_keys is ignored inside a transaction, so it is set on the raw connection
    # before SQLAlchemy begins one (the dxts engine begins with BEGIN IMMEDIATE).
    _sqlite_pragma(connection, "foreign_keys=OFF")
    try:
        with connection.begin():
            result = work(connection)
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
            if broken:
                tables = sorted({row[0] for row in broken})
                raise FailedPrecondition(
                    f"the migration left {len(broken)} rows whose foreign keys point nowhere "
                    f"(in {', '.join(tables)}); nothing was committed"
                )
        return result
    finally:
        _sqlite_pragma(connection, "foreign_keys=ON")


def _sqlite_pragma(connection: sa.Connection, pragma: str) -> None:
    cursor = connection.connection.cursor()
    try:
        cursor.execute(f"PRAGMA {pragma}")
    finally:
        cursor.close()


def _revisions(connection: sa.Connection) -> Revisions:
    script = ScriptDirectory.from_config(alembic_config())
    current = tuple(MigrationContext.configure(connection).get_current_heads())
    known = {rev.revision for rev in script.walk_revisions()}
    return Revisions(
        current=current,
        heads=tuple(script.get_heads()),
        unknown=tuple(rev for rev in current if rev not in known),
    )


def _upgrade(connection: sa.Connection, revision: str) -> Revisions:
    command.upgrade(alembic_config(connection), revision)
    return _revisions(connection)


async def upgrade(url: str, revision: str = "head") -> Revisions:
    """Migrate the database at `url` up to `revision` (default: the latest); idempotent.

    Raises `Unavailable` for an unreachable or too-old server, `InvalidArgument` for a bad URL,
    and `alembic.util.CommandError` for a revision that does not exist.
    """
    return await run_on_connection(url, lambda connection: _upgrade(connection, revision))


async def current(url: str) -> Revisions:
    """The revision(s) the database at `url` is at, and this code's head(s)."""
    return await run_on_connection(url, _revisions)


def _next_revision_id() -> str:
    """Revisions are numbered 0001, 0002...: the order is visible in the file names, and two
    branches adding the same number collide loudly instead of forking the history silently. The
    next is one past the highest, so a number left free (a branch merged later) is not reused."""
    script = ScriptDirectory.from_config(alembic_config())
    return f"{max(int(rev.revision) for rev in script.walk_revisions()) + 1:04d}"


def _autogenerate(connection: sa.Connection, message: str) -> Path:
    written = command.revision(
        alembic_config(connection),
        message=message,
        autogenerate=True,
        rev_id=_next_revision_id(),
    )
    scripts = written if isinstance(written, list) else [written]
    return Path(scripts[0].path)  # type: ignore[union-attr]


async def revision(url: str, message: str) -> Path:
    """Write a new revision autogenerated from the difference between `metadata` and the
    database at `url` (which must be at head); returns the new file, to be reviewed."""
    return await run_on_connection(url, lambda connection: _autogenerate(connection, message))
