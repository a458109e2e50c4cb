"""The Slurm adaptor's own small database (SQLite in its work directory): what it accepted, and
which Slurm job runs it.

The order of writes is what makes Submit exactly-once across a crash: the parcels and their
batch are recorded (with the batch's job name) *before* `sbatch`, the array's job id after it.
A batch found without a job id was interrupted in between: Slurm is asked for a job of that
name before anything is submitted again (`logic.adaptor.SlurmAdaptor._submit_batch`). Tables (their
own metadata, not part of the dxts schema):

* `SlurmBatches` — one `sbatch --array` each: its job name, the tasks' resource request (sbatch
  options), the array's job id once Slurm gave it;
* `SlurmJobs` — one row per accepted parcel: its identifier, its batch and task index, its
  terminal outcome (a serialised `Outcome`) once known;
* `SlurmCancelledKeys` — parcel ids cancelled before they were ever accepted: refused for good.

Outcomes are kept in the contract's binary encoding (`dxts.core.adaptor.codec`); opening the
database and the cancelled keys are the shared adaptor store's (`dxts.backends.store.state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.backends.store.state import (
    AdaptorStore,
    cancelled_keys_table,
    jobs_named,
    now,
    state_url,
)
from dxts.core.adaptor.codec import decode_outcome, encode_outcome
from dxts.core.adaptor.model import Outcome

slurm_metadata = sa.MetaData()

batches = sa.Table(
    "SlurmBatches",
    slurm_metadata,
    sa.Column("BatchID", sa.String(36), primary_key=True),
    sa.Column("JobName", sa.String(64), nullable=False, unique=True),
    sa.Column("Options", sa.Text(), nullable=False),  # the sbatch resource options, JSON
    sa.Column("SlurmJobID", sa.String(32), nullable=True),
    sa.Column("CreatedAt", sa.DateTime(), nullable=False),
)

jobs = sa.Table(
    "SlurmJobs",
    slurm_metadata,
    sa.Column("ParcelID", sa.String(36), primary_key=True),
    sa.Column("Identifier", sa.String(36), nullable=False, unique=True),
    sa.Column("BatchID", sa.String(36), sa.ForeignKey("SlurmBatches.BatchID"), nullable=False),
    sa.Column("TaskIndex", sa.Integer(), nullable=False),
    sa.Column("Outcome", sa.LargeBinary(), nullable=True),
    sa.Index("ix_SlurmJobs_BatchID", "BatchID"),
)

cancelled_keys = cancelled_keys_table("SlurmCancelledKeys", slurm_metadata)


@dataclass(frozen=True)
class Job:
    parcel_id: str
    identifier: str
    batch_id: str
    task_index: int
    slurm_job_id: str | None  # the array's; None while (or if) sbatch did not answer
    created_at: datetime
    outcome: Outcome | None

    @property
    def task(self) -> str:
        """The task's Slurm address, `<array job id>_<index>`."""
        return f"{self.slurm_job_id}_{self.task_index}"


@dataclass(frozen=True)
class NewBatch:
    batch_id: str
    name: str
    options: str  # JSON list of sbatch options


@dataclass(frozen=True)
class NewJob:
    parcel_id: str
    identifier: str
    batch_id: str
    task_index: int


def _job(row: Any) -> Job:
    outcome = decode_outcome(row.Outcome) if row.Outcome is not None else None
    return Job(
        row.ParcelID,
        row.Identifier,
        row.BatchID,
        row.TaskIndex,
        row.SlurmJobID,
        row.CreatedAt.replace(tzinfo=UTC),
        outcome,
    )


_JOINED = sa.select(
    jobs.c.ParcelID,
    jobs.c.Identifier,
    jobs.c.BatchID,
    jobs.c.TaskIndex,
    jobs.c.Outcome,
    batches.c.SlurmJobID,
    batches.c.CreatedAt,
).join(batches, batches.c.BatchID == jobs.c.BatchID)


class State(AdaptorStore):
    def __init__(self, work_dir: Path) -> None:
        super().__init__(state_url(work_dir), slurm_metadata, cancelled_keys)

    async def jobs_by(
        self, *, identifiers: Sequence[str] = (), parcel_ids: Sequence[str] = ()
    ) -> list[Job]:
        condition = jobs_named(jobs, identifiers, parcel_ids)

        async def work(conn: AsyncConnection) -> list[Job]:
            return [_job(row) for row in await conn.execute(_JOINED.where(condition))]

        return await self._run(work)

    async def in_flight(self) -> int:
        async def work(conn: AsyncConnection) -> int:
            query = sa.select(sa.func.count()).where(jobs.c.Outcome.is_(None))
            return int(await conn.scalar(query) or 0)

        return await self._run(work)

    async def record_intent(
        self,
        new_batches: Sequence[NewBatch],
        new: Sequence[NewJob],
        failed: Sequence[Outcome],
    ) -> None:
        """Record new batches and their parcels, before any sbatch; parcels that could not be
        prepared (`failed`, by identifier) are recorded with their outcome already."""
        ended = {o.identifier: encode_outcome(o) for o in failed}

        async def work(conn: AsyncConnection) -> None:
            created_at = now()
            await conn.execute(
                sa.insert(batches),
                [
                    {
                        "BatchID": b.batch_id,
                        "JobName": b.name,
                        "Options": b.options,
                        "CreatedAt": created_at,
                    }
                    for b in new_batches
                ],
            )
            await conn.execute(
                sa.insert(jobs),
                [
                    {
                        "ParcelID": j.parcel_id,
                        "Identifier": j.identifier,
                        "BatchID": j.batch_id,
                        "TaskIndex": j.task_index,
                        "Outcome": ended.get(j.identifier),
                    }
                    for j in new
                ],
            )

        if new:
            await self._run(work)

    async def unsubmitted_batches(self, batch_ids: Sequence[str]) -> list[NewBatch]:
        """Those of `batch_ids` with no Slurm job id yet."""

        async def work(conn: AsyncConnection) -> list[NewBatch]:
            query = sa.select(batches.c.BatchID, batches.c.JobName, batches.c.Options).where(
                batches.c.BatchID.in_(list(batch_ids)), batches.c.SlurmJobID.is_(None)
            )
            return [NewBatch(*row) for row in await conn.execute(query)]

        return await self._run(work)

    async def batch_jobs(self, batch_id: str) -> list[Job]:
        async def work(conn: AsyncConnection) -> list[Job]:
            query = _JOINED.where(jobs.c.BatchID == batch_id).order_by(jobs.c.TaskIndex)
            return [_job(row) for row in await conn.execute(query)]

        return await self._run(work)

    async def set_slurm_job(self, batch_id: str, slurm_job_id: str) -> None:
        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sa.update(batches)
                .where(batches.c.BatchID == batch_id)
                .values(SlurmJobID=slurm_job_id)
            )

        await self._run(work)

    async def finish(self, outcomes: Sequence[Outcome]) -> None:
        """Record terminal outcomes (by identifier) once: one already there is kept."""

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sa.update(jobs)
                .where(jobs.c.Identifier == sa.bindparam("identifier"), jobs.c.Outcome.is_(None))
                .values(Outcome=sa.bindparam("outcome")),
                [
                    {
                        "identifier": o.identifier,
                        "outcome": encode_outcome(o),
                    }
                    for o in outcomes
                ],
            )

        if outcomes:
            await self._run(work)

    async def counts(self) -> dict[str, int]:
        async def work(conn: AsyncConnection) -> dict[str, int]:
            query = sa.select(sa.func.count(), sa.func.count(jobs.c.Outcome))
            accepted, finished = (await conn.execute(query)).one()
            batches_submitted = await conn.scalar(
                sa.select(sa.func.count()).where(batches.c.SlurmJobID.is_not(None))
            )
            return {
                "accepted": int(accepted),
                "in_flight": int(accepted) - int(finished),
                "arrays_submitted": int(batches_submitted or 0),
            }

        return await self._run(work)
