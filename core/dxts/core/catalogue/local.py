"""The file catalogue dxts ships: its own small database (a SQLite file by default).

The watermark is exact. Each registration allocates one Seq from a counter whose row lock it
holds until it commits (`db.allocate_sequence`), so Seqs become visible in increasing order with
no gaps left to fill later; a page ends at a (Seq, FileID) cursor and the next page starts
strictly after it. A file committed concurrently with a query therefore has a larger Seq than
anything the query returned and is found by the next page. What a watermark query does not
return: files removed before it ran, and a file re-registered after removal only if the query
is resumed from before its new Seq (re-registering gives it a new one, so it is returned again;
a feeder's hash drops the repeat). Metadata never changes after registration, so a file cannot
come to match a query it did not match when it was registered.

The price is that registrations are serialised for the time of their transaction, which suits a
stand-in for an external catalogue; outputs are registered in batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.catalogue import db
from dxts.core.catalogue.interface import (
    CatalogueFile,
    CataloguePage,
    CatalogueSettings,
    FileCatalogue,
    Registered,
    parse_where,
)
from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition, FieldViolation, InvalidArgument
from dxts.core.ids import new_ids
from dxts.core.lfn import check_lfn

WATERMARK_VERSION = "w1"
PAGE_MAX = 10_000
CONFLICTS_SHOWN = 10


class LocalFileCatalogue(FileCatalogue):
    """A FileCatalogue in a database of its own, at `settings.url`."""

    def __init__(self, settings: CatalogueSettings | None = None) -> None:
        self.settings = settings or CatalogueSettings()
        self.database = Database(self.settings.url)

    async def start(self) -> None:
        await self.database.start()
        await self.database.run(db.create_tables, isolation=Isolation.READ_COMMITTED)

    async def close(self) -> None:
        await self.database.dispose()

    async def register(self, files: Iterable[CatalogueFile | Mapping[str, Any]]) -> Registered:
        batch = _merge(files)
        if not batch:
            return Registered(0, 0)

        async def work(conn: AsyncConnection) -> Registered:
            seq = await db.allocate_sequence(conn)
            existing = await db.find_files(conn, list(batch))
            conflicts = [lfn for lfn, row in existing.items() if not _same(row, batch[lfn])]
            if conflicts:
                shown = ", ".join(conflicts[:CONFLICTS_SHOWN])
                more = (
                    f" and {len(conflicts) - CONFLICTS_SHOWN} more"
                    if len(conflicts) > CONFLICTS_SHOWN
                    else ""
                )
                raise FailedPrecondition(
                    f"already registered with another size, checksum or metadata: {shown}{more}"
                )
            new = [file for lfn, file in batch.items() if lfn not in existing]
            file_ids = {lfn: row.FileID for lfn, row in existing.items()}
            file_ids.update(zip((file.lfn for file in new), new_ids(len(new)), strict=True))
            await db.insert_files(conn, [(file_ids[file.lfn], file) for file in new], seq)
            held = await db.find_replicas(conn, [row.FileID for row in existing.values()])
            missing = [
                (file_ids[lfn], se)
                for lfn, file in batch.items()
                for se in file.replicas
                if se not in held.get(file_ids[lfn], ())
            ]
            await db.insert_replicas(conn, missing)
            return Registered(len(new), len(missing))

        return await self.database.run(work, isolation=Isolation.READ_COMMITTED)

    async def query(
        self,
        where: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = 1000,
        with_replicas: bool = False,
        within: Sequence[str] | None = None,
    ) -> CataloguePage:
        conditions = parse_where(where)
        prefixes = None if within is None else list(dict.fromkeys(within))
        cursor = _parse_watermark(after)
        if not isinstance(limit, int) or not 0 < limit <= PAGE_MAX:
            raise InvalidArgument(f"a page holds 1 to {PAGE_MAX} files", field="limit")

        async def work(conn: AsyncConnection) -> CataloguePage:
            if prefixes == []:
                return CataloguePage([], _watermark(cursor), False)
            rows = await db.query_page(conn, conditions, cursor, limit + 1, prefixes)
            more = len(rows) > limit
            rows = rows[:limit]
            held = await db.find_replicas(conn, [r.FileID for r in rows]) if with_replicas else {}
            files = [_file(row, held.get(row.FileID, ())) for row in rows]
            end = (rows[-1].Seq, rows[-1].FileID) if rows else cursor
            return CataloguePage(files, _watermark(end), more)

        return await self.database.run(work, isolation=Isolation.READ_COMMITTED)

    async def files(self, lfns: Iterable[str]) -> dict[str, CatalogueFile]:
        wanted = _lfns(lfns)

        async def work(conn: AsyncConnection) -> dict[str, CatalogueFile]:
            rows = await db.find_files(conn, wanted)
            held = await db.find_replicas(conn, [row.FileID for row in rows.values()])
            return {lfn: _file(row, held.get(row.FileID, ())) for lfn, row in rows.items()}

        return await self.database.run(work, isolation=Isolation.READ_COMMITTED)

    async def replicas(self, lfns: Iterable[str]) -> dict[str, tuple[str, ...]]:
        return {lfn: file.replicas for lfn, file in (await self.files(lfns)).items()}

    async def remove_replicas(self, replicas: Mapping[str, Iterable[str]]) -> int:
        if not isinstance(replicas, Mapping):
            raise InvalidArgument("replicas map each LFN to storage elements", field="replicas")
        wanted = {lfn: sorted(set(_ses(ses, lfn))) for lfn, ses in replicas.items()}
        _lfns(wanted)

        async def work(conn: AsyncConnection) -> int:
            await db.lock_writers(conn)
            rows = await db.find_files(conn, list(wanted))
            pairs = [(row.FileID, se) for lfn, row in rows.items() for se in wanted[lfn]]
            return await db.delete_replicas(conn, pairs)

        return await self.database.run(work, isolation=Isolation.READ_COMMITTED)

    async def remove_files(self, lfns: Iterable[str]) -> int:
        wanted = _lfns(lfns)

        async def work(conn: AsyncConnection) -> int:
            await db.lock_writers(conn)
            rows = await db.find_files(conn, wanted)
            return await db.delete_files(conn, [row.FileID for row in rows.values()])

        return await self.database.run(work, isolation=Isolation.READ_COMMITTED)


def _merge(files: Iterable[CatalogueFile | Mapping[str, Any]]) -> dict[str, CatalogueFile]:
    """One entry per LFN: repeats with the same content pool their replicas, others are refused."""
    merged: dict[str, CatalogueFile] = {}
    first: dict[str, int] = {}
    for index, value in enumerate(files):
        try:
            file = (
                value if isinstance(value, CatalogueFile) else CatalogueFile.model_validate(value)
            )
        except ValidationError as error:
            raise InvalidArgument(
                [
                    FieldViolation(f"files[{index}].{'.'.join(map(str, e['loc']))}", e["msg"])
                    for e in error.errors(include_url=False)
                ]
            ) from None
        earlier = merged.get(file.lfn)
        if earlier is None:
            merged[file.lfn], first[file.lfn] = file, index
        elif earlier.same_file(file):
            replicas = tuple(dict.fromkeys(earlier.replicas + file.replicas))
            merged[file.lfn] = earlier.model_copy(update={"replicas": replicas})
        else:
            raise InvalidArgument(
                f"{file.lfn} repeats files[{first[file.lfn]}] with other content",
                field=f"files[{index}]",
            )
    return merged


def _same(row: sa.Row[Any], file: CatalogueFile) -> bool:
    return _file(row, ()).same_file(file)


def _file(row: sa.Row[Any], replicas: Iterable[str]) -> CatalogueFile:
    return CatalogueFile(
        lfn=row.LFN,
        size=row.Size,
        checksum=row.Checksum,
        metadata=row.Metadata or {},
        replicas=tuple(replicas),
    )


def _lfns(lfns: Iterable[str]) -> list[str]:
    if isinstance(lfns, str):
        raise InvalidArgument("expected a collection of LFNs, got one string", field="lfns")
    wanted = list(dict.fromkeys(lfns))
    for index, lfn in enumerate(wanted):
        check_lfn(lfn, field=f"lfns[{index}]")
    return wanted


def _ses(ses: Iterable[str], lfn: str) -> list[str]:
    if isinstance(ses, str) or not all(isinstance(se, str) and se for se in ses):
        raise InvalidArgument("a list of storage element names", field=f"replicas.{lfn}")
    return list(ses)


def _watermark(cursor: tuple[int, bytes] | None) -> str:
    seq, file_id = cursor if cursor is not None else (0, b"")
    return f"{WATERMARK_VERSION}:{seq}:{file_id.hex()}"


def _parse_watermark(token: str | None) -> tuple[int, bytes] | None:
    if token is None:
        return None
    try:
        version, seq, file_id = token.split(":")
        if version != WATERMARK_VERSION:
            raise ValueError(version)
        return int(seq), bytes.fromhex(file_id)
    except (AttributeError, ValueError):
        raise InvalidArgument(
            f"{token!r} is not a watermark this catalogue issued", field="after"
        ) from None
