"""The tables the counter declarations derive, their DDL, and the migration that creates them."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from dxts.core.counters import DATA_PARCELS, TRANSFORMATION, Counter, KeyColumn, Source
from dxts.core.counters.instances import COUNTED_STATUSES
from dxts.core.migrations import upgrade
from dxts.core.migrations.api import run_on_connection
from dxts.core.schema import execution, metadata
from dxts.core.states import InputStatus, ParcelStatus, values

MARIADB = mysql.dialect(is_mariadb=True)


def ddl(table: sa.Table) -> str:
    return str(sa.schema.CreateTable(table).compile(dialect=MARIADB))


def test_counter_tables_are_in_the_shared_metadata() -> None:
    for name in (
        "TransformationCounters",
        "TransformationCounterJournal",
        "DataParcelsCounters",
        "DataParcelsCounterJournal",
        "CounterLocks",
    ):
        assert name in metadata.tables


def test_counters_table_shape() -> None:
    sql = ddl(TRANSFORMATION.counters_table)
    assert "`TransformationID` BINARY(16) NOT NULL" in sql
    assert "`Entity` ENUM('Input','Parcel') NOT NULL" in sql
    assert "`Status` ENUM('" + "','".join(COUNTED_STATUSES) + "') NOT NULL" in sql
    assert "`Count` BIGINT NOT NULL" in sql
    assert "`UpdatedAt` DATETIME(6) NOT NULL" in sql
    assert "PRIMARY KEY (`TransformationID`, `Entity`, `Status`)" in sql
    assert "FOREIGN KEY" not in sql and "AUTO_INCREMENT" not in sql


def test_journal_table_shape() -> None:
    sql = ddl(TRANSFORMATION.journal_table)
    assert "`JournalID` BIGINT NOT NULL AUTO_INCREMENT" in sql
    assert "`CountDelta` BIGINT NOT NULL" in sql
    assert "`InsertedAt` DATETIME(6) NOT NULL" in sql
    assert "PRIMARY KEY (`JournalID`)" in sql
    assert "FOREIGN KEY" not in sql
    indexes = {
        tuple(c.name for c in index.columns) for index in TRANSFORMATION.journal_table.indexes
    }
    assert indexes == {("TransformationID", "Entity", "Status")}


def test_data_parcels_tables_shape() -> None:
    counters = ddl(DATA_PARCELS.counters_table)
    for measure in ("LFNCountAdded", "LFNSizeAdded", "LFNCountFreed", "LFNSizeFreed"):
        assert f"`{measure}` BIGINT NOT NULL" in counters
        assert f"`{measure}Delta` BIGINT NOT NULL" in ddl(DATA_PARCELS.journal_table)
    assert "`StorageElement` VARCHAR(64) NOT NULL" in counters
    assert "PRIMARY KEY (`TransformationID`, `Status`, `StorageElement`)" in counters
    for table in (DATA_PARCELS.counters_table, DATA_PARCELS.journal_table):
        assert ("StorageElement",) in {
            tuple(c.name for c in index.columns) for index in table.indexes
        }


def test_counter_locks_shape() -> None:
    sql = ddl(metadata.tables["CounterLocks"])
    assert "`Operation` ENUM('rebuild','fold') NOT NULL" in sql
    assert "PRIMARY KEY (`CounterName`, `Operation`)" in sql


def test_counted_statuses_are_the_union_of_both_machines_inputs_first() -> None:
    """Written out on purpose (the schema's ENUM); this is what keeps the copy exact."""
    inputs, parcels = values(InputStatus), values(ParcelStatus)
    assert COUNTED_STATUSES[: len(inputs)] == inputs
    assert COUNTED_STATUSES[len(inputs) :] == tuple(s for s in parcels if s not in inputs)


UNQUOTED = re.compile(r"(?<![`\w])(Count|UpdatedAt|InsertedAt|JournalID|Status|Entity)(?![`\w])")


def test_every_identifier_is_quoted() -> None:
    statements = [
        TRANSFORMATION._discrepancy({"TransformationID": b"x" * 16}),
        TRANSFORMATION._upsert("mysql", TRANSFORMATION.journal_table.c.JournalID.in_([1, 2])),
        sa.insert(TRANSFORMATION.journal_table).values(
            [{"TransformationID": b"x" * 16, "Entity": "Input", "Status": "Done", "CountDelta": 1}]
        ),
    ]
    for statement in statements:
        sql = str(statement.compile(dialect=MARIADB))
        assert not UNQUOTED.findall(sql), sql
    for table in (TRANSFORMATION.counters_table, TRANSFORMATION.journal_table):
        assert not UNQUOTED.findall(ddl(table))


def test_a_declaration_must_be_complete() -> None:
    key = (KeyColumn("TransformationID", sa.LargeBinary(16)),)
    with pytest.raises(ValueError, match="every key and measure"):
        Counter(
            "Broken",
            key=key,
            measures=("Count",),
            sources=(Source(execution.inputs, key={}, measures={"Count": 1}),),
        )
    with pytest.raises(ValueError, match="declared twice"):
        Counter(
            "Transformation",
            key=key,
            measures=("Count",),
            sources=(
                Source(
                    execution.inputs,
                    key={"TransformationID": execution.inputs.c.TransformationID},
                    measures={"Count": 1},
                ),
            ),
        )
    assert "BrokenCounters" not in metadata.tables


async def test_the_migration_creates_the_tables_and_their_lock_rows(db_url: str) -> None:
    revisions = await upgrade(db_url)
    assert revisions.at_head

    def lock_rows(connection: sa.Connection) -> set[tuple[str, str]]:
        rows = connection.execute(sa.select(metadata.tables["CounterLocks"])).all()
        return {(row.CounterName, row.Operation) for row in rows}

    assert await run_on_connection(db_url, lock_rows) == {
        (name, operation)
        for name in ("Transformation", "DataParcels")
        for operation in ("rebuild", "fold")
    }
