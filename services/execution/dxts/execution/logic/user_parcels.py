"""User jobs: the parcel definition's SubmitJob has execution create, and its status.

A user parcel is a base Parcels row (Compute, Unassigned, no transformation), a UserParcels row
(VO and subject, given by definition from the caller's identity) and a ComputeParcels row (the
process definition stored, the requirements, the CWL input object). It is dispatched like any
parcel and recorded like any parcel, except that it has no inputs: it simply becomes Done or
Failed, and its outputs are registered with the file catalogue but have no ParcelOutputs rows
(those hang off a transformation's declared outputs).

CreateUserParcel is idempotent by its request id: the id is kept in the parcel's annotations,
and a request id the same submitter used within the last `REQUEST_WINDOW_S` answers the parcel
it created (found through the (VO, Sub) index, whose entries end with the time-ordered ParcelID);
tries of one request are serialised by the kernel's creating command.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dxts.core.adaptor.model import Outcome, OutputFile
from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.core.errors import FieldViolation, InvalidArgument, NotFound
from dxts.core.identity import Identity
from dxts.core.ids import CONTENT_HASH_BYTES, id_to_str, new_id
from dxts.core.kernel.commands import Request, run_creating_command
from dxts.core.locks import LockManager
from dxts.core.states import ParcelStatus
from dxts.execution.logic.parcel_annotations import stored_outcome
from dxts.execution.records import ComputeFacet, Submitter, UserParcelRecord
from dxts.execution.store import user_parcels as db

RC = Isolation.READ_COMMITTED
REQUEST_ID = "request_id"
REQUEST_WINDOW_S = 24 * 3600
VO_MAX, SUB_MAX, REQUEST_ID_MAX = 32, 256, 128


@dataclass(frozen=True)
class UserJob:
    vo: str
    sub: str
    process_id: bytes
    requirements_id: bytes | None = None
    parameters: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None


@dataclass(frozen=True)
class UserParcelView:
    record: UserParcelRecord  # the parcel, its submitter, its compute facet
    outcome: Outcome | None

    @property
    def outputs(self) -> list[OutputFile]:
        """The files it produced, once Done (its outputs are registered, not ParcelOutputs)."""
        if self.outcome is None or self.record.parcel.status != ParcelStatus.DONE:
            return []
        return list(self.outcome.outputs)


def _checked(job: UserJob, request_id: str) -> None:
    problems = []
    for name, value, limit in (("vo", job.vo, VO_MAX), ("owner_sub", job.sub, SUB_MAX)):
        if not isinstance(value, str) or not 0 < len(value) <= limit:
            problems.append(FieldViolation(name, f"expected 1 to {limit} characters"))
    for name, digest in (("process_id", job.process_id), ("requirements_id", job.requirements_id)):
        if digest is not None and len(digest) != CONTENT_HASH_BYTES:
            problems.append(FieldViolation(name, f"a content hash is {CONTENT_HASH_BYTES} bytes"))
    for field, document in (
        ("parameters_json", job.parameters),
        ("annotations_json", job.annotations),
    ):
        if document is not None and not isinstance(document, dict):
            problems.append(FieldViolation(field, "expected a JSON object"))
    if len(request_id) > REQUEST_ID_MAX:
        problems.append(FieldViolation("request_id", f"at most {REQUEST_ID_MAX} characters"))
    if problems:
        raise InvalidArgument(problems)


def _earliest_id(window_s: float) -> bytes:
    """The smallest UUIDv7 minted `window_s` ago: its first 48 bits are the Unix time in ms."""
    millis = max(0, int((time.time() - window_s) * 1000))
    return millis.to_bytes(6, "big") + bytes(10)


async def create_user_parcel(
    database: Database,
    job: UserJob,
    *,
    request_id: str = "",
    locks: LockManager | None = None,
) -> bytes:
    """Create the job's parcel in Unassigned; returns its ParcelID (the first one's, when the
    submitter repeats a request id: the kernel's creating command serialises the tries)."""
    _checked(job, request_id)

    async def work(conn: Transaction) -> bytes:
        if request_id:
            recent = await db.recent_parcel_annotations(
                conn, job.vo, job.sub, _earliest_id(REQUEST_WINDOW_S)
            )
            for parcel in recent:
                annotations = parcel.annotations
                if isinstance(annotations, dict) and annotations.get(REQUEST_ID) == request_id:
                    return parcel.parcel_id
        parcel_id = new_id()
        annotations = dict(job.annotations or {})
        if request_id:
            annotations[REQUEST_ID] = request_id
        await db.insert_user_parcel(
            conn,
            parcel_id,
            Submitter(job.vo, job.sub),
            annotations or None,
            ComputeFacet(job.process_id, job.requirements_id, None, job.parameters),
            await db_now(conn),
        )
        return parcel_id

    request = Request.served(Identity(vo=job.vo, sub=job.sub), request_id)
    return await run_creating_command(database, locks, request, work, isolation=RC)


async def get_user_parcel(database: Database, parcel_id: bytes) -> UserParcelView:
    row = await database.run(lambda conn: db.user_parcel(conn, parcel_id), isolation=RC)
    if row is None:
        raise NotFound("user parcel", id_to_str(parcel_id))
    return UserParcelView(row, stored_outcome(row.parcel.annotations))
