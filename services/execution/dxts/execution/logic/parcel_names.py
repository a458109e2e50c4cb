"""Parcel handles (`p-10293`): a parcel's short name, and what a name a person typed stands
for (ResolveParcelName): a handle, a full id, or a prefix of an id's hex digits, each one
index probe (a handle is its table's primary key, a prefix a range of Parcels' key)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from dxts.core.db import Database, Isolation, Transaction
from dxts.core.errors import InvalidArgument, NotFound
from dxts.core.handles import handle, parse
from dxts.core.ids import UUID_BYTES, id_from_str, id_to_str
from dxts.execution.store import handles as handles_db

MIN_PREFIX = 4
SHOWN_CANDIDATES = 5
MAX_NAME = 64
FIELD = "name"
_HEX_PREFIX = re.compile(r"[0-9a-f-]+")
_FULL_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


async def handles_of(database: Database, parcel_ids: Iterable[bytes]) -> dict[bytes, str]:
    """Each parcel's handle ("p-10293"), by id."""
    wanted = list(parcel_ids)
    if not wanted:
        return {}
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        numbers = await handles_db.numbers(conn, wanted)
    return {i: handle("parcel", n) for i, n in numbers.items()}


async def candidates(database: Database, name: str) -> list[bytes]:
    """The parcel ids `name` may stand for (several for an ambiguous prefix, at most
    SHOWN_CANDIDATES + 1); the caller keeps those its caller may see."""
    text = name.strip().lower()
    if not text:
        raise InvalidArgument("name a parcel", field=FIELD)
    if len(text) > MAX_NAME:
        raise InvalidArgument(f"a parcel's name is at most {MAX_NAME} characters", field=FIELD)
    parsed = parse(text)

    async def work(conn: Transaction) -> list[bytes]:
        if parsed is not None:
            kind, number = parsed
            if kind != "parcel":
                raise InvalidArgument(
                    f"{name} is a {kind}, not a parcel (parcels are p-N)", field=FIELD
                )
            found = await handles_db.parcel_of_number(conn, number)
            return [found] if found else []
        if _FULL_ID.fullmatch(text):
            return [id_from_str(text, field=FIELD)]
        digits = text.replace("-", "")
        if not _HEX_PREFIX.fullmatch(text):
            return []
        if len(digits) < MIN_PREFIX:
            raise InvalidArgument(
                f"{name!r} is too short: give a handle (p-10293) or at least {MIN_PREFIX} hex "
                "digits of a parcel's id",
                field=FIELD,
            )
        low = bytes.fromhex(digits.ljust(UUID_BYTES * 2, "0")[: UUID_BYTES * 2])
        high = bytes.fromhex(digits.ljust(UUID_BYTES * 2, "f")[: UUID_BYTES * 2])
        return await handles_db.ids_in_range(conn, low, high, limit=SHOWN_CANDIDATES + 1)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


def the_one(name: str, seen: list[tuple[bytes, str]]) -> tuple[bytes, str]:
    """The single (id, handle) among the visible candidates; NotFound or an ambiguity named."""
    if not seen:
        raise NotFound("parcel", name)
    if len(seen) > 1:
        named = ", ".join(f"{h} ({id_to_str(i)})" for i, h in seen[:SHOWN_CANDIDATES])
        more = " and more" if len(seen) > SHOWN_CANDIDATES else ""
        raise InvalidArgument(
            f"{name!r} is ambiguous: it starts {named}{more}; give more characters or a handle",
            field=FIELD,
        )
    return seen[0]
