"""The local adaptor's own small database (SQLite in its work directory): what it accepted.

It is what makes Submit idempotent across restarts: a parcel id accepted once keeps its
identifier and its job for good, and a second Submit starts nothing. Tables (their own metadata,
not part of the dxts schema):

Payloads, submissions and outcomes are kept in the contract's binary encoding
(`dxts.core.adaptor.codec`).

* `LocalPayloads` — payloads by the SHA-256 of their serialised bytes (all parcels of one Submit
  share one, and so do Submits of the same process and sidecar);
* `LocalJobs` — one row per accepted parcel: its identifier, its submission, its state
  (queued → running → succeeded | failed | cancelled), the process group while running, the
  terminal outcome (a serialised `Outcome`), and whether a cancellation was asked for;
* `LocalCancelledKeys` — parcel ids cancelled before they were ever accepted: refused for good.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.backends.store.state import (
    AdaptorStore,
    cancelled_keys_table,
    jobs_named,
    now,
    state_url,
)
from dxts.core.adaptor.codec import (
    decode_outcome,
    decode_payload,
    decode_submission,
    encode_outcome,
    encode_payload,
    encode_submission,
)
from dxts.core.adaptor.model import Outcome, Payload, Submission

QUEUED, RUNNING = "queued", "running"
SUCCEEDED, FAILED, CANCELLED = "succeeded", "failed", "cancelled"
TERMINAL = (SUCCEEDED, FAILED, CANCELLED)

local_metadata = sa.MetaData()

payloads = sa.Table(
    "LocalPayloads",
    local_metadata,
    sa.Column("PayloadKey", sa.LargeBinary(32), primary_key=True),
    sa.Column("Payload", sa.LargeBinary(), nullable=False),
)

jobs = sa.Table(
    "LocalJobs",
    local_metadata,
    sa.Column("ParcelID", sa.String(36), primary_key=True),
    sa.Column("Identifier", sa.String(36), nullable=False, unique=True),
    sa.Column("PayloadKey", sa.LargeBinary(32), sa.ForeignKey("LocalPayloads.PayloadKey")),
    sa.Column("Submission", sa.LargeBinary(), nullable=False),
    sa.Column("State", sa.String(16), nullable=False),
    sa.Column("ProcessGroup", sa.Integer(), nullable=True),
    sa.Column("CancelRequested", sa.Boolean(), nullable=False, default=False),
    sa.Column("Outcome", sa.LargeBinary(), nullable=True),
    sa.Column("AcceptedAt", sa.DateTime(), nullable=False),
    sa.Column("FinishedAt", sa.DateTime(), nullable=True),
    sa.Index("ix_LocalJobs_State", "State"),
)

cancelled_keys = cancelled_keys_table("LocalCancelledKeys", local_metadata)


@dataclass(frozen=True)
class Job:
    parcel_id: str
    identifier: str
    state: str
    submission: Submission
    payload_key: bytes
    process_group: int | None
    cancel_requested: bool
    outcome: Outcome | None


def _job(row: Any) -> Job:
    submission = decode_submission(row.Submission)
    outcome = decode_outcome(row.Outcome) if row.Outcome is not None else None
    return Job(
        row.ParcelID,
        row.Identifier,
        row.State,
        submission,
        bytes(row.PayloadKey),
        row.ProcessGroup,
        bool(row.CancelRequested),
        outcome,
    )


class State(AdaptorStore):
    def __init__(self, work_dir: Path) -> None:
        super().__init__(state_url(work_dir), local_metadata, cancelled_keys)

    async def accept(
        self,
        payload: Payload,
        submissions: Sequence[Submission],
        identifiers: Sequence[str],
        capacity: int,
    ) -> list[tuple[str, str | None, str | None, bool]]:
        """For each submission, in order: (parcel id, identifier or None, refusal reason or
        None, accepted just now). Known keys keep their identifier; new ones take the next of
        `identifiers` and are queued."""
        blob = encode_payload(payload)
        key = hashlib.sha256(blob).digest()

        async def work(conn: AsyncConnection) -> list[tuple[str, str | None, str | None, bool]]:
            keys = [s.parcel_id for s in submissions]
            known = {
                row.ParcelID: row.Identifier
                for row in await conn.execute(
                    sa.select(jobs.c.ParcelID, jobs.c.Identifier).where(jobs.c.ParcelID.in_(keys))
                )
            }
            tombstones = await self.cancelled_among(conn, keys)
            in_flight = int(
                await conn.scalar(
                    sa.select(sa.func.count()).where(jobs.c.State.in_([QUEUED, RUNNING]))
                )
                or 0
            )
            fresh = iter(identifiers)
            answers: list[tuple[str, str | None, str | None, bool]] = []
            rows = []
            accepted_at = now()
            for submission in submissions:
                parcel_id = submission.parcel_id
                if parcel_id in known:
                    answers.append((parcel_id, known[parcel_id], None, False))
                elif parcel_id in tombstones:
                    answers.append((parcel_id, None, "cancelled before it was accepted", False))
                elif capacity and in_flight >= capacity:
                    answers.append((parcel_id, None, f"at capacity ({capacity} in flight)", False))
                else:
                    identifier = next(fresh)
                    known[parcel_id] = identifier
                    in_flight += 1
                    answers.append((parcel_id, identifier, None, True))
                    rows.append(
                        {
                            "ParcelID": parcel_id,
                            "Identifier": identifier,
                            "PayloadKey": key,
                            "Submission": encode_submission(submission),
                            "State": QUEUED,
                            "CancelRequested": False,
                            "AcceptedAt": accepted_at,
                        }
                    )
            if rows:
                await conn.execute(
                    sqlite.insert(payloads).on_conflict_do_nothing(),
                    [{"PayloadKey": key, "Payload": blob}],
                )
                await conn.execute(sa.insert(jobs), rows)
            return answers

        return await self._run(work)

    async def jobs_by(
        self, *, identifiers: Sequence[str] = (), parcel_ids: Sequence[str] = ()
    ) -> list[Job]:
        condition = jobs_named(jobs, identifiers, parcel_ids)

        async def work(conn: AsyncConnection) -> list[Job]:
            return [_job(row) for row in await conn.execute(sa.select(jobs).where(condition))]

        return await self._run(work)

    async def jobs_in(self, states: Sequence[str]) -> list[Job]:
        async def work(conn: AsyncConnection) -> list[Job]:
            query = (
                sa.select(jobs).where(jobs.c.State.in_(list(states))).order_by(jobs.c.AcceptedAt)
            )
            return [_job(row) for row in await conn.execute(query)]

        return await self._run(work)

    async def payload(self, key: bytes) -> Payload:
        async def work(conn: AsyncConnection) -> bytes:
            result = await conn.execute(
                sa.select(payloads.c.Payload).where(payloads.c.PayloadKey == key)
            )
            return bytes(result.scalar_one())

        return decode_payload(await self._run(work))

    async def start_job(self, parcel_id: str) -> bool:
        """queued → running, unless it was cancelled meanwhile; True when it may run."""

        async def work(conn: AsyncConnection) -> bool:
            result = await conn.execute(
                sa.update(jobs)
                .where(jobs.c.ParcelID == parcel_id, jobs.c.State == QUEUED)
                .values(State=RUNNING)
            )
            return bool(result.rowcount)

        return await self._run(work)

    async def set_process_group(self, parcel_id: str, group: int | None) -> None:
        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sa.update(jobs).where(jobs.c.ParcelID == parcel_id).values(ProcessGroup=group)
            )

        await self._run(work)

    async def finish(self, parcel_id: str, state: str, outcome: Outcome) -> bool:
        """Record a terminal outcome once; False when the job was already terminal."""

        async def work(conn: AsyncConnection) -> bool:
            result = await conn.execute(
                sa.update(jobs)
                .where(jobs.c.ParcelID == parcel_id, jobs.c.State.in_([QUEUED, RUNNING]))
                .values(
                    State=state,
                    Outcome=encode_outcome(outcome),
                    ProcessGroup=None,
                    FinishedAt=now(),
                )
            )
            return bool(result.rowcount)

        return await self._run(work)

    async def request_cancel(self, parcel_ids: Sequence[str]) -> None:
        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                sa.update(jobs)
                .where(jobs.c.ParcelID.in_(list(parcel_ids)), jobs.c.State.in_([QUEUED, RUNNING]))
                .values(CancelRequested=True)
            )

        await self._run(work)

    async def counts(self) -> dict[str, int]:
        async def work(conn: AsyncConnection) -> dict[str, int]:
            rows = await conn.execute(
                sa.select(jobs.c.State, sa.func.count()).group_by(jobs.c.State)
            )
            return {row[0]: int(row[1]) for row in rows}

        return await self._run(work)
