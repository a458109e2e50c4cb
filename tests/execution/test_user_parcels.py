"""User parcels: created from a submitted job (idempotent by request id), dispatched and recorded
like any parcel, read back with their outcome — on SQLite and MariaDB."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from definition_double import InMemoryTransformations
from recording_world import RC, TOOL, empty, outcome, parcel, rows_of

from dxts.core import content_store
from dxts.core.adaptor.mapping import outcome_to_proto
from dxts.core.adaptor.model import OutcomeResult
from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.db import Database
from dxts.core.errors import FailedPrecondition, InvalidArgument, NotFound
from dxts.core.ids import new_id
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.schema import execution
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic import user_parcels
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.execution.logic.user_parcels import UserJob, get_user_parcel
from dxts.v1.execution_pb2_grpc import ExecutionServiceServicer


async def create_user_parcel(database: Database, job: UserJob, **options: Any) -> bytes:
    """The logic of a CreateUserParcel call, answering as that call."""
    with serving(rpc(ExecutionServiceServicer.CreateUserParcel)):
        return await user_parcels.create_user_parcel(database, job, **options)


@pytest.fixture
async def job(database: Database) -> UserJob:
    await empty(database)
    async with database.transaction(RC) as conn:
        (process_id,) = await content_store.put_processes(conn, [TOOL])
        (requirements_id,) = await content_store.put_requirements(conn, [{"memory_mb": 2000}])
    return UserJob(
        vo="lhcb",
        sub="bob",
        process_id=process_id,
        requirements_id=requirements_id,
        parameters={"events": 10},
        annotations={"name": "my-job"},
    )


async def test_a_job_becomes_an_unassigned_user_parcel_once_per_request(
    database: Database, job: UserJob
) -> None:
    first = await create_user_parcel(database, job, request_id="req-1")
    again = await create_user_parcel(database, job, request_id="req-1")
    other = await create_user_parcel(database, job, request_id="req-2")
    unkeyed = [await create_user_parcel(database, job) for _ in range(2)]

    assert first == again
    assert len({first, other, *unkeyed}) == 4
    row = await parcel(database, first)
    assert (row.Status, row.Kind, row.TransformationID, row.Backend) == (
        "Unassigned",
        "Compute",
        None,
        None,
    )
    assert row.Annotations == {"name": "my-job", "request_id": "req-1"}
    (owner,) = await rows_of(database, execution.user_parcels, ParcelID=first)
    assert (owner.VO, owner.Sub) == ("lhcb", "bob")
    (facet,) = await rows_of(database, execution.compute_parcels, ParcelID=first)
    assert (bytes(facet.ProcessID), facet.Parameters) == (job.process_id, {"events": 10})
    # Another submitter's request id is theirs.
    alice = UserJob(**{**job.__dict__, "sub": "alice"})
    assert await create_user_parcel(database, alice, request_id="req-1") != first


async def test_a_recorded_user_parcel_reads_back_with_its_outcome(
    database: Database, job: UserJob, catalogue: LocalFileCatalogue
) -> None:
    parcel_id = await create_user_parcel(database, job)
    async with database.transaction(RC) as conn:  # the dispatcher submits it
        await conn.execute(
            sa.update(execution.parcels)
            .where(execution.parcels.c.ParcelID == parcel_id)
            .values(Status="Assigned", Backend="null")
        )
    lfn = f"/lhcb/user/b/bob/{parcel_id.hex()}.root"
    # The whole output object, as cwltool wrote it: a long past 2**53, non-BMP text, a record
    # holding the File (a JSON text, kept to the character).
    output_object = (
        f'{{"result": {{"class": "File", "location": "lfn:{lfn}", "format": "edam:format_1929"}},'
        ' "count": 1152921504606846977, "pair": {"note": "caf\\u00e9 😀", "ratio": 0.1}}'
    )
    await record_outcomes(
        database, [outcome(parcel_id, files=[("result", lfn)], output_object=output_object)]
    )
    assert (await get_user_parcel(database, parcel_id)).outputs == []  # not Done yet
    await Recorder(
        database, catalogue, ActiveSnapshot(InMemoryTransformations())
    ).record_completing()

    view = await get_user_parcel(database, parcel_id)

    record = view.record
    assert (record.parcel.status, record.submitter.vo, record.submitter.sub) == (
        "Done",
        "lhcb",
        "bob",
    )
    assert [f.lfn for f in view.outputs] == [lfn]
    assert view.outcome is not None
    assert view.outcome.result == OutcomeResult.SUCCEEDED
    as_said = outcome_to_proto(view.outcome)  # as GetUserParcel says
    assert as_said.output_object_json == output_object
    assert lfn in await catalogue.files([lfn])


async def test_bad_jobs_are_refused(database: Database, job: UserJob) -> None:
    with pytest.raises(FailedPrecondition, match="not stored"):
        await create_user_parcel(database, UserJob("lhcb", "bob", bytes(32)))
    with pytest.raises(InvalidArgument) as refused:
        await create_user_parcel(database, UserJob("", "b" * 300, b"short", parameters=[]))  # type: ignore[arg-type]
    assert {v.field for v in refused.value.violations} == {
        "vo",
        "owner_sub",
        "process_id",
        "parameters_json",
    }
    with pytest.raises(NotFound):
        await get_user_parcel(database, new_id())
    assert await rows_of(database, execution.parcels) == []
