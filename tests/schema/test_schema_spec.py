"""THE GUARD: the migrated MariaDB schema is the specified DDL, table by table.

The spec's `CREATE TABLE ... ( ... );` blocks are parsed from the schema specification kept beside
the repository (`SPEC_PATH`; the tests skip where it is absent) and compared with what MariaDB's
information_schema reports after `upgrade`: columns in order with their types, nullability,
defaults, AUTO_INCREMENT and collation; the primary key in order; unique keys; indexes (by columns,
names ignored); foreign keys with their delete rule; CHECK constraints; the InnoDB engine. Every
later change to the schema, in code or in the spec, has to keep this passing.

Deliberate deviations from the spec's text, and why:

* Every DATETIME is DATETIME(6): timestamps are microsecond UTC (project rule), because ordering
  by time within a second matters to the logs and sweeps.
* WorkgraphLog has no DDL in the spec ("identical shape, keyed on WorkgraphID, with the workgraph
  statuses"), so it is checked against TransformationLog's DDL with WorkgraphID in place of
  TransformationID, referencing Workgraphs, and the Workgraphs.Status values.
* What InnoDB adds on its own is not a difference: an index for each foreign key that no spec key
  starts with, the json_valid CHECK MariaDB attaches to every JSON column (stored as LONGTEXT),
  MariaDB's display widths (int(11)) and BOOLEAN stored as tinyint(1).

Tables beyond the spec's (the journalled counters of docs/counters.md, Alembic's version table) are
neither required nor refused here; their own tests cover them.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlalchemy as sa

from dxts.core.migrations import upgrade
from dxts.core.migrations.api import run_on_connection

SPEC_PATH = Path(__file__).resolve().parents[2].parent / "shared/spec/DX-ADR-004-schema.txt"

# The deviation above: the spec's DATETIME is stored as DATETIME(6).
DATETIME_AS_STORED = "datetime(6)"


@dataclass(frozen=True)
class Col:
    """One column as the comparison sees it, from either side."""

    name: str
    type: str  # binary(16), varchar(32), bigint, int, tinyint(1), json, datetime(6), enum('a','b')
    nullable: bool
    default: str | None  # as MariaDB reports it: 'New', 0, 1
    auto_increment: bool
    collation: str | None  # only for VARCHAR/ENUM columns


@dataclass(frozen=True)
class Fk:
    columns: tuple[str, ...]
    table: str
    referenced: tuple[str, ...]
    on_delete: str  # CASCADE or RESTRICT (MariaDB's name for "no action given")
    on_update: str


@dataclass
class Shape:
    """A table as the spec writes it or as the server reports it."""

    name: str
    columns: list[Col] = field(default_factory=list)
    primary_key: tuple[str, ...] = ()
    unique: set[tuple[str, ...]] = field(default_factory=set)
    indexes: set[tuple[str, ...]] = field(default_factory=set)
    foreign_keys: set[Fk] = field(default_factory=set)
    checks: set[str] = field(default_factory=set)
    engine: str = "InnoDB"


# ---------------------------------------------------------------------------------------------
# The spec side


def split_top_level(body: str) -> list[str]:
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


def names(column_list: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in column_list.split(","))


def normalise_check(clause: str) -> str:
    """CHECK text without quoting, spacing, case or parentheses: MariaDB re-renders the
    expression (`a` is null <> (`b` is null)), and the behaviour test below pins its meaning."""
    return re.sub(r"[\s`()]", "", clause).lower()


def spec_column(item: str, table_collation: str) -> Col:
    match = re.fullmatch(r"(\w+)\s+(ENUM\s*\((.*?)\)|\w+(?:\(\d+\))?)\s*(.*)", item, re.S)
    if not match:
        raise ValueError(f"cannot parse the column definition {item!r}")
    name, spec_type, enum_values, rest = match.groups()
    base = spec_type.split("(")[0].upper()
    if base == "ENUM":
        values = re.findall(r"'([^']*)'", enum_values)
        stored = "enum(" + ",".join(f"'{value}'" for value in values) + ")"
    else:
        stored = {
            "BOOLEAN": "tinyint(1)",
            "DATETIME": DATETIME_AS_STORED,
            "BIGINT": "bigint",
            "INT": "int",
            "JSON": "json",
        }.get(base, spec_type.lower())
    default = re.search(r"DEFAULT\s+(\S+)", rest)
    collate = re.search(r"COLLATE\s+(\w+)", rest)
    textual = base in ("VARCHAR", "ENUM")
    default_text = default.group(1) if default else None
    return Col(
        name=name,
        type=stored,
        nullable=not re.search(r"NOT\s+NULL", rest),
        default={"TRUE": "1", "FALSE": "0"}.get((default_text or "").upper(), default_text),
        auto_increment="AUTO_INCREMENT" in rest,
        collation=(collate.group(1) if collate else table_collation) if textual else None,
    )


def parse_spec(text: str, table_collation: str) -> dict[str, Shape]:
    """Every `CREATE TABLE` block of the spec, as the server is expected to report it."""
    tables: dict[str, Shape] = {}
    for name, body in re.findall(r"^CREATE TABLE (\w+) \((.*?)^\);", text, re.M | re.S):
        shape = Shape(name)
        for item in split_top_level(re.sub(r"--[^\n]*", "", body)):
            item = re.sub(r"\s+", " ", item)
            if match := re.fullmatch(r"PRIMARY KEY \((.*)\)", item):
                shape.primary_key = names(match[1])
            elif match := re.fullmatch(r"UNIQUE KEY \((.*)\)", item):
                shape.unique.add(names(match[1]))
            elif match := re.fullmatch(r"INDEX \((.*)\)", item):
                shape.indexes.add(names(match[1]))
            elif match := re.fullmatch(
                r"FOREIGN KEY \((.*?)\) REFERENCES (\w+) \((.*?)\)( ON DELETE CASCADE)?", item
            ):
                on_delete = "CASCADE" if match[4] else "RESTRICT"
                fk = Fk(names(match[1]), match[2], names(match[3]), on_delete, "RESTRICT")
                shape.foreign_keys.add(fk)
            elif match := re.fullmatch(r"CHECK \((.*)\)", item):
                shape.checks.add(normalise_check(match[1]))
            else:
                shape.columns.append(spec_column(item, table_collation))
        tables[name] = shape
    return tables


def workgraph_log(spec: dict[str, Shape]) -> Shape:
    """WorkgraphLog: TransformationLog's shape keyed on WorkgraphID, with workgraph statuses."""
    log = copy.deepcopy(spec["TransformationLog"])
    log.name = "WorkgraphLog"
    statuses = next(c.type for c in spec["Workgraphs"].columns if c.name == "Status")

    def swap(column: str) -> str:
        return "WorkgraphID" if column == "TransformationID" else column

    log.columns = [
        Col(
            swap(c.name),
            statuses if c.name in ("OldStatus", "NewStatus") else c.type,
            c.nullable,
            c.default,
            c.auto_increment,
            c.collation,
        )
        for c in log.columns
    ]
    log.indexes = {tuple(swap(c) for c in index) for index in log.indexes}
    log.foreign_keys = {
        Fk(("WorkgraphID",), "Workgraphs", ("WorkgraphID",), fk.on_delete, fk.on_update)
        for fk in log.foreign_keys
    }
    return log


def with_innodb_fk_indexes(shape: Shape) -> set[tuple[str, ...]]:
    """The spec's indexes plus one per foreign key that no spec key starts with, which InnoDB
    creates itself because a foreign key needs an index."""
    keys = [shape.primary_key, *shape.unique, *shape.indexes]
    own = {
        fk.columns
        for fk in shape.foreign_keys
        if not any(key[: len(fk.columns)] == fk.columns for key in keys)
    }
    return shape.indexes | own


SPEC_TEXT = SPEC_PATH.read_text() if SPEC_PATH.exists() else None
SKIP_NO_SPEC = f"the spec is not beside the repository ({SPEC_PATH} is absent)"
TABLE_COLLATION = "utf8mb4_unicode_ci"  # the tables' default (schema/metadata.py); LFNs override
SPEC = parse_spec(SPEC_TEXT, TABLE_COLLATION) if SPEC_TEXT else {}
if SPEC:
    SPEC["WorkgraphLog"] = workgraph_log(SPEC)
SPEC_TABLES = sorted(SPEC) or [pytest.param("-", marks=pytest.mark.skip(reason=SKIP_NO_SPEC))]


# ---------------------------------------------------------------------------------------------
# The server side


def server_shapes(connection: sa.Connection) -> dict[str, Shape]:
    def rows(sql: str) -> list[sa.Row[tuple[object, ...]]]:
        return list(connection.execute(sa.text(sql)).all())

    shapes = {
        name: Shape(name, engine=str(engine))
        for name, engine in rows(
            "SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = DATABASE()"
        )
    }
    json_checked = set()
    for table, clause in rows(
        "SELECT TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
        "WHERE CONSTRAINT_SCHEMA = DATABASE()"
    ):
        if match := re.fullmatch(r"json_valid\(`(\w+)`\)", str(clause)):
            json_checked.add((table, match[1]))
        else:
            shapes[str(table)].checks.add(normalise_check(str(clause)))
    for table, name, default, nullable, data_type, column_type, collation, extra in rows(
        "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_DEFAULT, IS_NULLABLE, DATA_TYPE, COLUMN_TYPE, "
        "COLLATION_NAME, EXTRA FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, ORDINAL_POSITION"
    ):
        stored = re.sub(r"^(bigint|int)\(\d+\)", r"\1", str(column_type))
        if data_type == "json" or (data_type == "longtext" and (table, name) in json_checked):
            stored = "json"
        shapes[str(table)].columns.append(
            Col(
                name=str(name),
                type=stored,
                nullable=nullable == "YES",
                default=None if default in (None, "NULL") else str(default),
                auto_increment="auto_increment" in str(extra).lower(),
                collation=str(collation) if data_type in ("varchar", "enum") else None,
            )
        )
    indexes: dict[tuple[str, str], tuple[bool, list[str]]] = {}
    for table, index, non_unique, column in rows(
        "SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS "
        "WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX"
    ):
        indexes.setdefault((str(table), str(index)), (not int(non_unique), []))[1].append(
            str(column)
        )
    for (table, index), (unique, columns) in indexes.items():
        if index == "PRIMARY":
            shapes[table].primary_key = tuple(columns)
        else:
            (shapes[table].unique if unique else shapes[table].indexes).add(tuple(columns))
    fks: dict[tuple[str, str], tuple[str, list[str], list[str]]] = {}
    for table, name, column, referenced_table, referenced_column in rows(
        "SELECT TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, REFERENCED_TABLE_NAME, "
        "REFERENCED_COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
        "WHERE TABLE_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME IS NOT NULL "
        "ORDER BY TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION"
    ):
        entry = fks.setdefault((str(table), str(name)), (str(referenced_table), [], []))
        entry[1].append(str(column))
        entry[2].append(str(referenced_column))
    rules = {
        (str(table), str(name)): (str(delete), str(update))
        for table, name, delete, update in rows(
            "SELECT TABLE_NAME, CONSTRAINT_NAME, DELETE_RULE, UPDATE_RULE "
            "FROM information_schema.REFERENTIAL_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = DATABASE()"
        )
    }
    for (table, name), (referenced_table, columns, referenced) in fks.items():
        on_delete, on_update = (r.replace("NO ACTION", "RESTRICT") for r in rules[table, name])
        shapes[table].foreign_keys.add(
            Fk(tuple(columns), referenced_table, tuple(referenced), on_delete, on_update)
        )
    return shapes


@pytest.fixture(scope="module")
async def migrated(mysql_test_url: str) -> str:
    assert (await upgrade(mysql_test_url)).at_head
    return mysql_test_url


@pytest.fixture(scope="module")
async def server(migrated: str) -> dict[str, Shape]:
    return await run_on_connection(migrated, server_shapes)


# ---------------------------------------------------------------------------------------------
# The comparison


def test_every_spec_table_was_parsed() -> None:
    if not SPEC_TEXT:
        pytest.skip(SKIP_NO_SPEC)
    blocks = len(re.findall(r"^CREATE TABLE ", SPEC_TEXT, re.M))
    assert len(SPEC) == blocks + 1  # + WorkgraphLog
    for shape in SPEC.values():
        assert shape.columns and shape.primary_key, shape.name
        assert set(shape.primary_key) <= {c.name for c in shape.columns}, shape.name


@pytest.mark.parametrize("table", SPEC_TABLES)
def test_table_matches_the_spec(table: str, server: dict[str, Shape]) -> None:
    expected = SPEC[table]
    assert table in server, f"{table} is in the spec but not in the migrated database"
    actual = server[table]
    assert actual.columns == expected.columns
    assert actual.primary_key == expected.primary_key
    assert actual.unique == expected.unique
    assert actual.indexes == with_innodb_fk_indexes(expected)
    assert actual.foreign_keys == expected.foreign_keys
    assert actual.checks == expected.checks
    assert actual.engine == expected.engine


# The assertions the foundation issue names, written out rather than parsed, so that a parser
# mistake cannot hide them.


def test_inputs_keys(server: dict[str, Shape]) -> None:
    inputs = server["Inputs"]
    assert inputs.primary_key == ("TransformationID", "InputID")
    assert ("TransformationID", "InputHash") in inputs.unique
    assert (
        Fk(
            ("TransformationID", "ParentInputID"),
            "Inputs",
            ("TransformationID", "InputID"),
            "CASCADE",
            "RESTRICT",
        )
        in inputs.foreign_keys
    )
    lfn = next(c for c in inputs.columns if c.name == "LFN")
    assert (lfn.type, lfn.collation) == ("varchar(512)", "utf8mb4_bin")


async def test_deleting_a_split_parent_cascades_to_its_children(migrated: str) -> None:
    """The composite self reference does what ON DELETE CASCADE says, on the real server."""
    tid, parent, child = b"T" * 16, b"P" * 16, b"C" * 16

    def scenario(connection: sa.Connection) -> list[bytes]:
        savepoint = connection.begin_nested()
        try:
            run = connection.exec_driver_sql
            run("INSERT INTO Ownership (OwnershipID, VO, Sub) VALUES (%s, 'vo', 'sub')", (tid,))
            run(
                "INSERT INTO Transformations (TransformationID, OwnershipID, Type, Kind, Packer, "
                "UpdatedAt) VALUES (%s, %s, 'T', 'Data', 'p', UTC_TIMESTAMP(6))",
                (tid, tid),
            )
            for input_id, parent_id, input_hash in [(parent, None, b"1"), (child, parent, b"2")]:
                run(
                    "INSERT INTO Inputs (TransformationID, InputID, ParentInputID, InputHash, "
                    "UpdatedAt) VALUES (%s, %s, %s, %s, UTC_TIMESTAMP(6))",
                    (tid, input_id, parent_id, input_hash * 16),
                )
            run("DELETE FROM Inputs WHERE InputID = %s", (parent,))
            return list(run("SELECT InputID FROM Inputs").scalars())
        finally:
            savepoint.rollback()

    assert await run_on_connection(migrated, scenario) == []


async def test_actions_check_needs_exactly_one_owner(migrated: str) -> None:
    """The Actions CHECK as MariaDB enforces it: neither owner, or both, is refused."""

    def attempt(connection: sa.Connection) -> dict[str, bool]:
        # The owners need no rows: this is about the CHECK, not the foreign keys.
        connection.exec_driver_sql("SET SESSION foreign_key_checks = 0")
        outcomes = {}
        try:
            for label, workgraph, transformation in [
                ("none", None, None),
                ("workgraph", b"W" * 16, None),
                ("transformation", None, b"T" * 16),
                ("both", b"W" * 16, b"T" * 16),
            ]:
                savepoint = connection.begin_nested()
                try:
                    connection.exec_driver_sql(
                        "INSERT INTO Actions (WorkgraphID, TransformationID, State, Position, "
                        "Action) VALUES (%s, %s, %s, 1, 'a')",
                        (workgraph, transformation, label),
                    )
                    outcomes[label] = True
                except sa.exc.DBAPIError:
                    outcomes[label] = False
                finally:
                    savepoint.rollback()
        finally:
            connection.exec_driver_sql("SET SESSION foreign_key_checks = 1")
        return outcomes

    assert await run_on_connection(migrated, attempt) == {
        "none": False,
        "workgraph": True,
        "transformation": True,
        "both": False,
    }
