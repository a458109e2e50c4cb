"""Adding a revision: `revision()` autogenerates one from what the database lacks, numbered
after the current head, lint-clean, and it upgrades the database back to the metadata.

Runs on a copy of the migrations folder, so the repository's versions/ is never written to.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from dxts.core.errors import FailedPrecondition
from dxts.core.migrations import api, current, revision, upgrade
from dxts.core.schema import metadata

DROPPED_INDEX = "ix_Workgraphs_Status"
PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


@pytest.fixture
def migrations_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "migrations"
    shutil.copytree(api.MIGRATIONS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(api, "ALEMBIC_INI", copy / "alembic.ini")
    return copy / "versions"


def _drop_index(connection: sa.Connection) -> None:
    connection.execute(sa.text(f"DROP INDEX {DROPPED_INDEX}" + _on_table(connection)))


def _on_table(connection: sa.Connection) -> str:
    return "" if connection.dialect.name == "sqlite" else " ON Workgraphs"


def _diff(connection: sa.Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts=api.context_options(connection))
    return list(compare_metadata(context, metadata))


async def test_revision_autogenerates_the_missing_change(
    db_url: str, migrations_copy: Path
) -> None:
    script = ScriptDirectory.from_config(api.alembic_config())
    previous_head = script.get_current_head()
    number = f"{max(int(rev.revision) for rev in script.walk_revisions()) + 1:04d}"
    await upgrade(db_url)
    await api.run_on_connection(db_url, _drop_index)

    path = await revision(db_url, "restore the workgraph status index")

    assert path.parent == migrations_copy
    assert path.name == f"{number}_restore_the_workgraph_status_index.py"
    written = ScriptDirectory.from_config(api.alembic_config()).get_revision(number)
    assert written is not None and written.down_revision == previous_head
    source = path.read_text()
    assert f'op.f("{DROPPED_INDEX}")' in source
    if "sqlite" in db_url:
        assert "batch_alter_table" in source  # SQLite changes are rendered as table rebuilds
    lint = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "ruff", "check", "--config", str(PYPROJECT), str(path)],
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout

    revisions = await current(db_url)
    assert revisions.heads == (number,) and not revisions.at_head
    assert await upgrade(db_url) == api.Revisions(current=(number,), heads=(number,))
    assert await api.run_on_connection(db_url, _diff) == []


async def test_sqlite_table_rebuild_keeps_rows_that_reference_it(tmp_path: Path) -> None:
    """A batch migration on SQLite copies a table and drops the original, which with foreign
    keys on would fail (or cascade) for every row pointing at it; the runner switches them off
    for the migration and checks them all before committing."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'rebuild.sqlite'}"
    await upgrade(url)
    workgraphs, ownership = metadata.tables["Workgraphs"], metadata.tables["Ownership"]

    def seed(connection: sa.Connection) -> None:
        connection.execute(
            workgraphs.insert().values(
                WorkgraphID=b"W" * 16, Type="T", StrippedSpec={}, UpdatedAt=datetime.now(UTC)
            )
        )
        connection.execute(
            ownership.insert().values(
                OwnershipID=b"O" * 16, VO="vo", Sub="s", WorkgraphID=b"W" * 16
            )
        )

    def rebuild(connection: sa.Connection) -> None:
        with Operations(MigrationContext.configure(connection)).batch_alter_table(
            "Workgraphs", recreate="always"
        ):
            pass

    def rows(connection: sa.Connection) -> tuple[int, int]:
        count = sa.select(sa.func.count())
        return (
            connection.execute(count.select_from(workgraphs)).scalar_one(),
            connection.execute(count.select_from(ownership)).scalar_one(),
        )

    await api.run_on_connection(url, seed)
    await api.run_on_connection(url, rebuild)
    assert await api.run_on_connection(url, rows) == (1, 1)


async def test_sqlite_migration_leaving_broken_references_commits_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'orphans.sqlite'}"
    await upgrade(url)
    ownership = metadata.tables["Ownership"]

    def orphan(connection: sa.Connection) -> None:
        connection.execute(
            ownership.insert().values(
                OwnershipID=b"O" * 16, VO="vo", Sub="s", WorkgraphID=b"?" * 16
            )
        )

    with pytest.raises(FailedPrecondition, match="foreign keys point nowhere"):
        await api.run_on_connection(url, orphan)
    count = sa.select(sa.func.count()).select_from(ownership)
    assert await api.run_on_connection(url, lambda c: c.execute(count).scalar_one()) == 0
