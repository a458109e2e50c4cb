"""SQL of GroupFailures: the failed parcels of some transformations, each with what a failure is
grouped on (class, backend, site, own words, exit code, transformation) and when it failed; the
words, class and site taken out of `Annotations` by the database (JSON paths), so no parcel's
whole annotations leave it. Read in full the first time a transformation's failures are asked
for, then only those failed since (`failed_since`, no JSON read, then `failed_rows_of` for the
new ones): `dxts.execution.logic.failure_folds` keeps the rest in memory. One statement each, on
the (TransformationID, Status) index and the primary keys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from dxts.core.schema.definition import transformations
from dxts.core.schema.execution import parcel_inputs, parcels
from dxts.core.states import ParcelStatus
from dxts.execution.store.common import chunked

_OUTCOME = ("outcome",)
_FAILURE = ("outcome", "failure")


def failed_at() -> sa.ColumnElement[datetime]:
    """When a parcel failed: its completion, else its last update."""
    return sa.func.coalesce(parcels.c.CompletedAt, parcels.c.UpdatedAt)


class json_value(FunctionElement[Any]):
    """A scalar at a constant path of a JSON column, extracted once (MariaDB's JSON_VALUE;
    SQLAlchemy's `as_string()` extracts twice a row, to tell a JSON null apart)."""

    inherit_cache = True


@compiles(json_value, "mysql")
@compiles(json_value, "mariadb")
def _json_value_mysql(element: json_value, compiler: Any, **kw: Any) -> str:
    return f"JSON_VALUE({compiler.process(element.clauses, **kw)})"


@compiles(json_value, "sqlite")
def _json_value_sqlite(element: json_value, compiler: Any, **kw: Any) -> str:
    return f"json_extract({compiler.process(element.clauses, **kw)})"


def _text(*path: str) -> sa.ColumnElement[Any]:
    """The path's scalar; the path (names of this module only) is written into the statement,
    so that it is part of the statement's cache key."""
    return json_value(parcels.c.Annotations, sa.literal_column(f"'$.{'.'.join(path)}'"))


def _words() -> sa.ColumnElement[Any]:
    """A failed parcel's own words: the tool's line, else the backend's message, else the
    reason execution recorded (empty strings read as absent, as `failure_groups` reads them)."""
    return sa.func.coalesce(
        sa.func.nullif(_text(*_FAILURE, "tool_message"), ""),
        sa.func.nullif(_text(*_OUTCOME, "message"), ""),
        sa.func.nullif(_text("reason"), ""),
        "",
    )


def _key() -> list[sa.ColumnElement[Any]]:
    """What failures are grouped on, in `FailureKey`'s order."""
    return [
        parcels.c.TransformationID,
        parcels.c.Backend,
        sa.func.coalesce(_text(*_FAILURE, "class"), ""),
        sa.func.coalesce(_text(*_FAILURE, "site"), ""),
        _words(),
        _text(*_OUTCOME, "exit_code"),
    ]


class FailureKey(NamedTuple):
    """What failed parcels are told apart by: alike word for word."""

    transformation_id: bytes
    backend: str
    failure_class: str
    site: str
    words: str
    exit_code: int | None


class FailedRow(NamedTuple):
    """One failed parcel: which, what it is grouped on, and when it failed (naive UTC)."""

    parcel_id: bytes
    key: FailureKey
    failed_at: datetime


def _number(value: Any) -> int | None:
    """An exit code as the database gives it (MariaDB: text, SQLite: an integer)."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _failed_rows(rows: Any) -> list[FailedRow]:
    return [
        FailedRow(
            bytes(r[0]),
            FailureKey(bytes(r[1]), r[2] or "", r[3], r[4], r[5], _number(r[6])),
            r[7],
        )
        for r in rows
    ]


def _failed(transformation_ids: Sequence[bytes]) -> list[sa.ColumnElement[bool]]:
    return [
        parcels.c.TransformationID.in_(transformation_ids),
        parcels.c.Status == ParcelStatus.FAILED,
    ]


async def failed_rows(
    conn: AsyncConnection, transformation_ids: Sequence[bytes]
) -> list[FailedRow]:
    """Every failed parcel of the transformations, with what it is grouped on."""
    rows = await conn.execute(
        sa.select(parcels.c.ParcelID, *_key(), failed_at()).where(*_failed(transformation_ids))
    )
    return _failed_rows(rows)


async def failed_since(
    conn: AsyncConnection, bounds: Mapping[bytes, datetime]
) -> list[tuple[bytes, bytes]]:
    """(TransformationID, ParcelID) of each transformation's parcels failed at or after its
    bound: index entries and the rows' times only, no annotation read."""
    if not bounds:
        return []
    c = parcels.c
    rows = await conn.execute(
        sa.select(c.TransformationID, c.ParcelID).where(
            c.Status == ParcelStatus.FAILED,
            sa.or_(
                *(
                    sa.and_(c.TransformationID == tid, failed_at() >= bound)
                    for tid, bound in bounds.items()
                )
            ),
        )
    )
    return [(bytes(tid), bytes(pid)) for tid, pid in rows]


async def failed_rows_of(conn: AsyncConnection, parcel_ids: Sequence[bytes]) -> list[FailedRow]:
    """These failed parcels, with what each is grouped on: one statement per chunk of ids."""
    found: list[FailedRow] = []
    for chunk in chunked(sorted(parcel_ids)):
        rows = await conn.execute(
            sa.select(parcels.c.ParcelID, *_key(), failed_at()).where(
                parcels.c.ParcelID.in_(chunk), parcels.c.Status == ParcelStatus.FAILED
            )
        )
        found.extend(_failed_rows(rows))
    return found


async def statuses_of(
    conn: AsyncConnection, transformation_ids: Sequence[bytes]
) -> dict[bytes, str]:
    """TransformationID → its status, as this transaction sees it."""
    t = transformations.c
    rows = await conn.execute(
        sa.select(t.TransformationID, t.Status).where(t.TransformationID.in_(transformation_ids))
    )
    return {bytes(tid): str(status) for tid, status in rows}


async def input_ids_of(
    conn: AsyncConnection, parcel_ids: Sequence[bytes]
) -> dict[bytes, list[bytes]]:
    """ParcelID → the ids of the inputs it carried."""
    if not parcel_ids:
        return {}
    pi = parcel_inputs.c
    rows = await conn.execute(
        sa.select(pi.ParcelID, pi.InputID)
        .where(pi.ParcelID.in_(parcel_ids))
        .order_by(pi.ParcelID, pi.InputID)
    )
    found: dict[bytes, list[bytes]] = {}
    for parcel_id, input_id in rows:
        found.setdefault(bytes(parcel_id), []).append(bytes(input_id))
    return found
