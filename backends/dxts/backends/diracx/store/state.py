"""The DiracX adaptor's own small database (SQLite in its work directory): which parcel became
which DiracX job.

Tables (their own metadata, not part of the dxts schema):

* `DiracXJobs` — one row per parcel the adaptor took on: its `SlotID` (the identifier dxts
  records in DiracXIDs), the DiracX `JobID` once DiracX accepted the job (NULL between the row's
  insert and that answer: a crash there is repaired by searching DiracX for the parcel's job
  name before submitting again), and the terminal outcome once the job ended (a serialised
  `Outcome`, answered again on every later Poll without asking DiracX).
* `DiracXCancelledKeys` — parcel ids cancelled before they were ever accepted: refused for good.
* `DiracXKillRequests` — DiracX jobs dxts asked to cancel. DiracX applies a status update only
  when its timestamp is newer than the job's last one, so a Kill racing a pilot's own update
  (Matched, Running) can be logged yet leave the job running: Poll sends the Kill again until
  DiracX says Killed, and a job that then ends Failed (its payload killed) is CANCELLED.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.backends.store.state import state_url
from dxts.core.adaptor.codec import decode_outcome, encode_outcome
from dxts.core.adaptor.model import Outcome
from dxts.core.db import Database, Isolation

IMMEDIATE = Isolation.SERIALIZABLE  # SQLite: every transaction is one writer at a time

diracx_metadata = sa.MetaData()

jobs = sa.Table(
    "DiracXJobs",
    diracx_metadata,
    sa.Column("ParcelID", sa.String(36), primary_key=True),
    sa.Column("SlotID", sa.String(36), nullable=False, unique=True),
    sa.Column("JobID", sa.Integer(), nullable=True, unique=True),
    sa.Column("Outcome", sa.LargeBinary(), nullable=True),
    sa.Column("AcceptedAt", sa.DateTime(), nullable=False),
    sa.Column("FinishedAt", sa.DateTime(), nullable=True),
    sa.Index("ix_DiracXJobs_Finished", "FinishedAt"),
)

cancelled_keys = sa.Table(
    "DiracXCancelledKeys",
    diracx_metadata,
    sa.Column("ParcelID", sa.String(36), primary_key=True),
)

kill_requests = sa.Table(
    "DiracXKillRequests",
    diracx_metadata,
    sa.Column("JobID", sa.Integer(), primary_key=True),
)


@dataclass(frozen=True)
class Job:
    parcel_id: str
    slot_id: str
    job_id: int | None
    outcome: Outcome | None


def _job(row: Any) -> Job:
    outcome = decode_outcome(row.Outcome) if row.Outcome is not None else None
    return Job(row.ParcelID, row.SlotID, row.JobID, outcome)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class State:
    def __init__(self, work_dir: Path) -> None:
        self.database = Database(state_url(work_dir))

    async def start(self) -> None:
        await self.database.start()
        await self._run(lambda conn: conn.run_sync(diracx_metadata.create_all))

    async def close(self) -> None:
        await self.database.dispose()

    async def _run(self, work: Any) -> Any:
        return await self.database.run(work, isolation=IMMEDIATE)

    async def by_parcel(self, parcel_ids: Sequence[str]) -> dict[str, Job]:
        async def work(conn: AsyncConnection) -> dict[str, Job]:
            rows = await conn.execute(sa.select(jobs).where(jobs.c.ParcelID.in_(list(parcel_ids))))
            return {row.ParcelID: _job(row) for row in rows}

        return await self._run(work)

    async def by_slot(self, slot_ids: Sequence[str]) -> dict[str, Job]:
        async def work(conn: AsyncConnection) -> dict[str, Job]:
            rows = await conn.execute(sa.select(jobs).where(jobs.c.SlotID.in_(list(slot_ids))))
            return {row.SlotID: _job(row) for row in rows}

        return await self._run(work)

    async def tombstoned(self, parcel_ids: Sequence[str]) -> set[str]:
        async def work(conn: AsyncConnection) -> set[str]:
            query = sa.select(cancelled_keys.c.ParcelID).where(
                cancelled_keys.c.ParcelID.in_(list(parcel_ids))
            )
            return {row[0] for row in await conn.execute(query)}

        return await self._run(work)

    async def in_flight(self) -> int:
        async def work(conn: AsyncConnection) -> int:
            query = sa.select(sa.func.count()).where(
                jobs.c.JobID.is_not(None), jobs.c.FinishedAt.is_(None)
            )
            return int(await conn.scalar(query) or 0)

        return await self._run(work)

    async def reserve(self, slots: Mapping[str, str]) -> None:
        """Record parcel id → new slot id, before DiracX is asked (JobID NULL)."""

        async def work(conn: AsyncConnection) -> None:
            now = _now()
            await conn.execute(
                sa.insert(jobs),
                [{"ParcelID": p, "SlotID": s, "AcceptedAt": now} for p, s in slots.items()],
            )

        if slots:
            await self._run(work)

    async def record_jobs(self, job_ids: Mapping[str, int]) -> None:
        """Parcel id → the DiracX job it became."""

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sa.update(jobs)
                .where(jobs.c.ParcelID == sa.bindparam("parcel"), jobs.c.JobID.is_(None))
                .values(JobID=sa.bindparam("job")),
                [{"parcel": p, "job": j} for p, j in job_ids.items()],
            )

        if job_ids:
            await self._run(work)

    async def finish(self, outcomes: Sequence[Outcome]) -> None:
        """Record terminal outcomes (by parcel id) once; a recorded one is kept."""

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sa.update(jobs)
                .where(jobs.c.ParcelID == sa.bindparam("parcel"), jobs.c.Outcome.is_(None))
                .values(Outcome=sa.bindparam("outcome"), FinishedAt=_now()),
                [{"parcel": o.parcel_id, "outcome": encode_outcome(o)} for o in outcomes],
            )

        if outcomes:
            await self._run(work)

    async def tombstone(self, parcel_ids: Sequence[str]) -> None:
        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sqlite.insert(cancelled_keys).on_conflict_do_nothing(),
                [{"ParcelID": p} for p in parcel_ids],
            )

        if parcel_ids:
            await self._run(work)

    async def request_kills(self, job_ids: Sequence[int]) -> None:
        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sqlite.insert(kill_requests).on_conflict_do_nothing(),
                [{"JobID": j} for j in job_ids],
            )

        if job_ids:
            await self._run(work)

    async def kills_requested(self, job_ids: Sequence[int]) -> set[int]:
        async def work(conn: AsyncConnection) -> set[int]:
            query = sa.select(kill_requests.c.JobID).where(kill_requests.c.JobID.in_(list(job_ids)))
            return {int(row[0]) for row in await conn.execute(query)}

        return await self._run(work) if job_ids else set()

    async def counts(self) -> dict[str, int]:
        async def work(conn: AsyncConnection) -> dict[str, int]:
            row = (
                await conn.execute(
                    sa.select(
                        sa.func.count(),
                        sa.func.count(jobs.c.JobID),
                        sa.func.count(jobs.c.FinishedAt),
                    )
                )
            ).one()
            return {"accepted": int(row[1]), "reserved": int(row[0]), "finished": int(row[2])}

        return await self._run(work)
