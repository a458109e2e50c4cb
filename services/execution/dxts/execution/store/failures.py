"""SQL of GroupFailures: the failed parcels of some transformations counted in the database by
what a failure is grouped on (class, backend, site, own words, exit code, transformation),
each group's first and last failure and its latest parcel; the words, class and site taken out
of `Annotations` by the database (JSON paths), so no parcel's whole annotations leave it. Then
the latest parcels of a few such groups and the inputs of the examples shown. One statement
each, on the (TransformationID, Status) index and ParcelInputs' primary key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from dxts.core.schema.execution import parcel_inputs, parcels
from dxts.core.states import ParcelStatus

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
    so that it is part of the statement's cache key and the same in SELECT and GROUP BY."""
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


def _key() -> dict[str, sa.ColumnElement[Any]]:
    """What failures are counted by, by name."""
    return {
        "TransformationID": parcels.c.TransformationID,
        "Backend": parcels.c.Backend,
        "failure_class": sa.func.coalesce(_text(*_FAILURE, "class"), ""),
        "site": sa.func.coalesce(_text(*_FAILURE, "site"), ""),
        "words": _words(),
        "exit_code": _text(*_OUTCOME, "exit_code"),
    }


class span_number(FunctionElement[int]):
    """Which of equal spans of `width` seconds from `start` a moment falls in (0 the first),
    for moments at or after `start`: integer arithmetic on the seconds between them."""

    type = sa.Integer()
    inherit_cache = True


@compiles(span_number, "mysql")
@compiles(span_number, "mariadb")
def _span_mysql(element: span_number, compiler: Any, **kw: Any) -> str:
    moment, start, width = (compiler.process(c, **kw) for c in element.clauses)
    return f"(TIMESTAMPDIFF(SECOND, {start}, {moment}) DIV {width})"


@compiles(span_number, "sqlite")
def _span_sqlite(element: span_number, compiler: Any, **kw: Any) -> str:
    moment, start, width = (compiler.process(c, **kw) for c in element.clauses)
    seconds = (
        f"(CAST(strftime('%s', {moment}) AS INTEGER) - CAST(strftime('%s', {start}) AS INTEGER))"
    )
    return f"({seconds} / {width})"


class FailureKey(NamedTuple):
    """What failed parcels are counted by (`counted_failures`): alike word for word."""

    transformation_id: bytes
    backend: str
    failure_class: str
    site: str
    words: str
    exit_code: int | None


@dataclass(frozen=True)
class Counted:
    """Failed parcels alike word for word: how many, when, and the latest one."""

    @property
    def key(self) -> FailureKey:
        """What they are counted by, as `counted_over_time` names it."""
        return FailureKey(
            self.transformation_id,
            self.backend,
            self.failure_class,
            self.site,
            self.words,
            self.exit_code,
        )

    transformation_id: bytes
    backend: str
    failure_class: str
    site: str
    words: str
    exit_code: int | None
    count: int
    first_seen: datetime
    last_seen: datetime
    latest: bytes  # the greatest ParcelID (UUIDv7: the last created)


def _conditions(
    transformation_ids: Sequence[bytes], since: datetime | None
) -> list[sa.ColumnElement[bool]]:
    c = parcels.c
    found = [c.TransformationID.in_(transformation_ids), c.Status == ParcelStatus.FAILED]
    if since is not None:
        found.append(failed_at() >= since)
    return found


def _number(value: Any) -> int | None:
    """An exit code as the database gives it (MariaDB: text, SQLite: an integer)."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


async def counted_failures(
    conn: AsyncConnection,
    transformation_ids: Sequence[bytes],
    since: datetime | None,
    limit: int,
) -> list[Counted]:
    """The failed parcels counted by what they are grouped on, the largest first, at most
    `limit` such counts."""
    key = list(_key().values())
    count = sa.func.count().label("n")
    rows = await conn.execute(
        sa.select(
            *(expression.label(name) for name, expression in _key().items()),
            count,
            sa.func.min(failed_at()).label("first_seen"),
            sa.func.max(failed_at()).label("last_seen"),
            sa.func.max(parcels.c.ParcelID).label("latest"),
        )
        .where(*_conditions(transformation_ids, since))
        .group_by(*key)
        .order_by(count.desc())
        .limit(limit)
    )
    return [
        Counted(
            bytes(r.TransformationID),
            r.Backend or "",
            r.failure_class,
            r.site,
            r.words,
            _number(r.exit_code),
            r.n,
            r.first_seen,
            r.last_seen,
            bytes(r.latest),
        )
        for r in rows
    ]


async def counted_over_time(
    conn: AsyncConnection,
    transformation_ids: Sequence[bytes],
    start: datetime,
    width_s: int,
) -> list[tuple[FailureKey, int, int]]:
    """The failed parcels since `start` counted by what they are grouped on (the `Counted`
    key) and by span of `width_s` seconds: (key, span number, count)."""
    key = list(_key().values())
    span = span_number(failed_at(), sa.literal(start, sa.DateTime()), sa.literal(width_s))
    rows = await conn.execute(
        sa.select(*key, span.label("span"), sa.func.count().label("n"))
        .where(*_conditions(transformation_ids, start))
        .group_by(*key, span)
    )
    return [
        (
            FailureKey(bytes(r[0]), r[1] or "", r[2], r[3], r[4], _number(r[5])),
            int(r.span),
            int(r.n),
        )
        for r in rows
    ]


async def latest_failed(
    conn: AsyncConnection,
    transformation_ids: Sequence[bytes],
    since: datetime | None,
    scanned: int,
) -> list[tuple[FailureKey, bytes]]:
    """The latest `scanned` failed parcels (by id: UUIDv7, creation order), each with what it
    is counted by (the `Counted` key), the latest first: the parcels are chosen before any
    annotation is read, so the JSON is read `scanned` times, not once per failed parcel."""
    latest = (
        sa.select(parcels.c.ParcelID)
        .where(*_conditions(transformation_ids, since))
        .order_by(parcels.c.ParcelID.desc())
        .limit(scanned)
        .subquery()
    )
    rows = await conn.execute(
        sa.select(parcels.c.ParcelID, *_key().values())
        .join_from(parcels, latest, latest.c.ParcelID == parcels.c.ParcelID)
        .order_by(parcels.c.ParcelID.desc())
    )
    return [
        (
            FailureKey(bytes(r[1]), r[2] or "", r[3], r[4], r[5], _number(r[6])),
            bytes(r.ParcelID),
        )
        for r in rows
    ]


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
