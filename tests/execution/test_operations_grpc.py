"""The OperationsRpcs over real gRPC: who may call what, request ids, and the replies — on SQLite
and MariaDB."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from definition_double import InMemoryTransformations
from google.protobuf import json_format
from recording_world import (
    RC,
    TOOL,
    World,
    assert_counters_exact,
    empty,
    feed,
    inputs_of,
    outcome,
    pack,
    parcel,
    report,
    statuses,
    transformation,
    user_parcel,
)

from dxts.core import content_store
from dxts.core.catalogue import CatalogueSettings
from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.db import Database
from dxts.core.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from dxts.core.grpc import DevKeys, GrpcServer, Service, channel
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.identity import current_identity
from dxts.core.ids import hash_to_str, id_to_str
from dxts.core.locks import LockManager
from dxts.core.schema import accounting
from dxts.core.settings import ServerSettings
from dxts.core.states import InputStatus, TransformationStatus
from dxts.execution.edge.servicer_operations import OperationsRpcs, record_outcome_messages
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.transformations import ActiveSnapshot, Description
from dxts.execution.settings import ExecutionSettings
from dxts.v1 import common_pb2, execution_pb2, execution_pb2_grpc

CALLERS = {
    "alice": ("lhcb", "alice", []),  # owns the transformations
    "bob": ("lhcb", "bob", []),  # same VO
    "operator": ("lhcb", "olga", ["operator"]),
    "carol": ("belle", "carol", []),  # another VO
    "dispatcher": ("dxts", "dxts-dispatcher", ["dispatcher"]),
    "service": ("dxts", "dxts-definition", ["service"]),  # definition's lifecycle, SubmitJob
}


class ByVO(InMemoryTransformations):
    """Definition's rule: a transformation is seen by its VO and by dxts's components (execution
    itself asks with its own token, outside any request)."""

    async def describe(self, transformation_id: bytes, *, token: str | None) -> Description:
        found = await super().describe(transformation_id, token=token)
        if token is None:
            return found
        identity = current_identity()
        if identity.vo != found.vo and not identity.has_role("service"):
            raise NotFound("transformation", id_to_str(transformation_id))
        return found


class Servicer(OperationsRpcs, execution_pb2_grpc.ExecutionServiceServicer):
    def __init__(self, database: Database, transformations: ByVO) -> None:
        self.database = database
        self.transformations = transformations
        self.locks = LockManager(database)
        self.settings = ExecutionSettings()
        # No sweeps here to wake when parcels become Completing or Unassigned.
        self.parcels_completing = self.parcels_unassigned = lambda: None


@pytest.fixture(scope="module")
def definitions() -> ByVO:
    return ByVO()


@pytest.fixture(scope="module")
async def stubs(
    database: Database, definitions: ByVO, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, Any]]:
    keys = DevKeys.load_or_create(tmp_path_factory.mktemp("keys"))
    servicer = Servicer(database, definitions)
    service = Service.of(
        execution_pb2.DESCRIPTOR.services_by_name["ExecutionService"],
        execution_pb2_grpc.add_ExecutionServiceServicer_to_server,
        servicer,
    )
    server = GrpcServer(
        [service], settings=ServerSettings(listen="127.0.0.1:0"), verifier=keys.verifier()
    )
    async with server:
        channels = {
            name: channel(server.address, token=keys.issue(vo, sub, roles))
            for name, (vo, sub, roles) in CALLERS.items()
        }
        try:
            yield {
                name: execution_pb2_grpc.ExecutionServiceStub(ch)  # type: ignore[misc]
                for name, ch in channels.items()
            }
        finally:
            for ch in channels.values():
                await ch.close()
            await servicer.locks.dispose()


@pytest.fixture
async def world(database: Database, definitions: ByVO) -> World:
    await empty(database)
    world = await transformation(database)
    definitions.put(world.record())
    return world


def select_statuses(*statuses: InputStatus) -> execution_pb2.InputSelection:
    return execution_pb2.InputSelection(statuses=[enum_to_proto(s) for s in statuses])  # type: ignore[misc]


async def test_only_components_record_outcomes(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    (p,) = await pack(database, world, [await feed(database, world, 1)])
    request = execution_pb2.RecordOutcomesRequest(outcomes=[outcome(p)])
    with pytest.raises(PermissionDenied):
        await stubs["operator"].RecordOutcomes(request)

    reply = await stubs["dispatcher"].RecordOutcomes(request)

    assert [a.disposition for a in reply.acks] == [common_pb2.OUTCOME_DISPOSITION_RECORDED]
    assert reply.acks[0].parcel_id == id_to_str(p)


async def test_steering_a_transformation_is_for_its_owner_and_operators(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    tid = id_to_str(world.transformation_id)
    await feed(database, world, 3)
    request = execution_pb2.WriteOffInputsRequest(
        request_id="halt-1",
        transformation_id=tid,
        selection=select_statuses(InputStatus.UNASSIGNED),
        reason="halted",
    )
    with pytest.raises(PermissionDenied, match="operator"):
        await stubs["bob"].WriteOffInputs(request)
    with pytest.raises(NotFound):
        await stubs["carol"].WriteOffInputs(request)

    first = await stubs["operator"].WriteOffInputs(request)
    again = await stubs["operator"].WriteOffInputs(request)  # a retry: the same answer

    assert first.written_off_count == again.written_off_count == 3
    async with database.transaction(RC) as conn:
        log = accounting.transformation_log
        (row,) = await conn.execute(sa.select(log).where(log.c.EventType == "WriteOffInputs"))
    assert (row.Author, row.Message, row.Data) == (
        "olga",
        "halted",
        {"command": "WriteOffInputs", "request_id": "halt-1", "result": {"written_off": 3}},
    )
    assert await statuses(database, world.transformation_id) == {"NotProcessed": 3}
    # The owner resets; nothing is Problematic.
    reset = await stubs["alice"].ResetInputs(
        execution_pb2.ResetInputsRequest(
            transformation_id=tid, selection=execution_pb2.InputSelection(input_ids=[tid])
        )
    )
    assert reset.reset_count == 0


async def test_cancelling_a_user_job_is_for_its_submitter(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    p = await user_parcel(database, status="Unassigned")  # submitted by lhcb/bob
    request = execution_pb2.CancelParcelsRequest(
        selection=execution_pb2.ParcelSelection(parcel_ids=[id_to_str(p)])
    )
    with pytest.raises(PermissionDenied):
        await stubs["alice"].CancelParcels(request)
    with pytest.raises(NotFound):
        await stubs["carol"].CancelParcels(request)

    reply = await stubs["bob"].CancelParcels(request)

    assert (reply.cancelled_count, reply.cancel_requested_count) == (1, 0)


async def test_user_jobs_over_grpc(
    database: Database, world: World, stubs: dict[str, Any], tmp_path: Path
) -> None:
    async with database.transaction(RC) as conn:
        (process_id,) = await content_store.put_processes(conn, [TOOL])
    request = execution_pb2.CreateUserParcelRequest(
        request_id="job-1",
        vo="lhcb",
        owner_sub="bob",
        process_id=hash_to_str(process_id),
        parameters_json='{"n": 1}',
    )
    # Definition's SubmitJob creates the parcel with its service token, once it has checked
    # the job is its caller's: nobody else creates one, not even for themselves.
    for person in ("alice", "bob"):
        with pytest.raises(PermissionDenied, match="CreateUserParcel may be called by service"):
            await stubs[person].CreateUserParcel(request)

    created = await stubs["service"].CreateUserParcel(request)
    assert (await stubs["service"].CreateUserParcel(request)).parcel_id == created.parcel_id

    got = await stubs["alice"].GetUserParcel(
        execution_pb2.GetUserParcelRequest(parcel_id=created.parcel_id)
    )
    assert (got.vo, got.owner_sub, got.compute.parameters_json) == ("lhcb", "bob", '{"n":1}')
    assert got.parcel.status == common_pb2.PARCEL_STATUS_UNASSIGNED
    assert not got.HasField("outcome")
    with pytest.raises(NotFound):
        await stubs["carol"].GetUserParcel(
            execution_pb2.GetUserParcelRequest(parcel_id=created.parcel_id)
        )


async def test_cleaning_over_grpc_needs_the_right_state(
    database: Database, world: World, definitions: ByVO, stubs: dict[str, Any]
) -> None:
    await feed(database, world, 2)
    request = execution_pb2.CleanTransformationRequest(
        transformation_id=id_to_str(world.transformation_id),
        mode=execution_pb2.CLEAN_MODE_ARCHIVE,
    )
    with pytest.raises(FailedPrecondition, match="Active"):
        await stubs["service"].CleanTransformation(request)
    definitions.update(world.transformation_id, status=TransformationStatus.ARCHIVING)

    reply = await stubs["service"].CleanTransformation(request)

    assert reply.complete and reply.rows_deleted >= 2
    assert await statuses(database, world.transformation_id) == {}


async def test_provenance_shows_only_what_the_caller_may_see(
    database: Database, world: World, definitions: ByVO, stubs: dict[str, Any], tmp_path: Path
) -> None:
    (i,) = await feed(database, world, 1)
    (p,) = await pack(database, world, [[i]])
    lfn = f"/lhcb/o/{p.hex()}.dst"
    await stubs["dispatcher"].RecordOutcomes(
        execution_pb2.RecordOutcomesRequest(
            outcomes=[outcome(p, report=report(**{id_to_str(i): "SUCCESS"}), files=[("out", lfn)])]
        )
    )
    catalogue = LocalFileCatalogue(CatalogueSettings(url=f"sqlite+aiosqlite:///{tmp_path}/c.db"))
    await catalogue.start()
    await Recorder(database, catalogue, ActiveSnapshot(definitions)).record_completing()
    await catalogue.close()

    reply = await stubs["bob"].Provenance(execution_pb2.ProvenanceRequest(lfn=lfn))

    (record,) = reply.records
    assert (record.output.lfn, record.output.output_name, record.parcel.parcel_id) == (
        lfn,
        "out",
        id_to_str(p),
    )
    assert [x.input_id for x in record.inputs] == [id_to_str(i)]
    assert record.inputs[0].status == common_pb2.INPUT_STATUS_PROCESSED
    with pytest.raises(NotFound):
        await stubs["carol"].Provenance(execution_pb2.ProvenanceRequest(lfn=lfn))


# -- an operator deciding a Failed input in its hook's place ----------------------------------


async def failed(
    database: Database, world: World, count: int, why: str = "node lost"
) -> list[bytes]:
    """`count` inputs that failed together in one parcel (Failed, ErrorCount 1)."""
    inputs = await feed(database, world, count)
    (p,) = await pack(database, world, [inputs])
    await record_outcome_messages(
        database, [outcome(p, result=common_pb2.OUTCOME_RESULT_FAILED, message=why)]
    )
    assert await statuses(database, world.transformation_id) == {"Failed": count}
    return inputs


def decide(world: World, input_id: bytes, **fields: Any) -> execution_pb2.DecideFailedInputRequest:
    return execution_pb2.DecideFailedInputRequest(
        transformation_id=id_to_str(world.transformation_id), input_id=id_to_str(input_id), **fields
    )


async def logged(database: Database, world: World, event: str) -> list[Any]:
    log = accounting.transformation_log
    async with database.transaction(RC) as conn:
        return list(
            await conn.execute(
                sa.select(log)
                .where(log.c.TransformationID == world.transformation_id, log.c.EventType == event)
                .order_by(log.c.LogID)
            )
        )


async def test_an_operator_retries_a_failed_input_elsewhere_once_per_request(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    i, other = await failed(database, world, 2)
    request = decide(
        world,
        i,
        request_id="retry-1",
        reason="the node is gone; try Slurm with more memory",
        retry=execution_pb2.RetryDecision(backend="slurm", requirements_json='{"memory_mb": 4000}'),
    )
    with pytest.raises(PermissionDenied, match="operator"):
        await stubs["bob"].DecideFailedInput(request)
    with pytest.raises(NotFound):
        await stubs["carol"].DecideFailedInput(request)

    first = await stubs["operator"].DecideFailedInput(request)
    again = await stubs["operator"].DecideFailedInput(request)  # a retry: the same answer

    assert first == again
    assert (first.status, list(first.child_input_ids)) == (common_pb2.INPUT_STATUS_UNASSIGNED, [])
    rows = await inputs_of(database, world.transformation_id)
    assert (rows[i].Status, rows[i].ErrorCount) == ("Unassigned", 1)  # its errors still count
    assert rows[other].Status == "Failed"  # the hook's, still
    parcel_row = await parcel(database, bytes(rows[i].LastParcelID))
    assert parcel_row.Annotations["retry_with"] == {
        "backend": "slurm",
        "requirements": {"memory_mb": 4000},
    }
    (command,) = await logged(database, world, "DecideFailedInput")
    assert (command.Author, command.Message) == ("olga", request.reason)
    assert command.Data == {
        "command": "DecideFailedInput",
        "request_id": "retry-1",
        "result": {
            "input_id": id_to_str(i),
            "decision": "RetryWith",
            "status": "Unassigned",
            "children": [],
        },
    }
    (decided,) = await logged(database, world, "FailedInputDecided")
    assert (decided.Message, decided.Data["by"], decided.Data["inputs"]) == (
        request.reason,
        "operator",
        [id_to_str(i)],
    )
    # Decided already: another decision on it is refused, naming its state.
    with pytest.raises(FailedPrecondition, match="is Unassigned: only a Failed input"):
        await stubs["alice"].DecideFailedInput(
            decide(world, i, reason="again", write_off=execution_pb2.WriteOffDecision())
        )
    await assert_counters_exact(database)


async def test_an_operator_writes_off_or_splits_a_failed_input(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    gone, big = await failed(database, world, 2, why="too big")
    lfn = (await inputs_of(database, world.transformation_id))[big].LFN
    halves = [
        {"lfn": lfn, "lfn_size": 500, "descriptor": {"Mask": "1-50"}},
        {"lfn": lfn, "lfn_size": 500, "descriptor": {"Mask": "51-100"}},
    ]

    off = await stubs["operator"].DecideFailedInput(
        decide(
            world, gone, reason="the file is corrupt", write_off=execution_pb2.WriteOffDecision()
        )
    )
    split = await stubs["alice"].DecideFailedInput(
        decide(
            world,
            big,
            reason="too big for one job",
            split=execution_pb2.SplitDecision(children_json=json.dumps(halves)),
        )
    )

    assert off.status == common_pb2.INPUT_STATUS_NOT_PROCESSED
    assert split.status == common_pb2.INPUT_STATUS_SPLIT
    rows = await inputs_of(database, world.transformation_id)
    children = {id_to_str(k): r for k, r in rows.items() if r.ParentInputID is not None}
    assert sorted(children) == sorted(split.child_input_ids)
    assert {(r.Status, r.ErrorCount, bytes(r.ParentInputID)) for r in children.values()} == {
        ("Unassigned", 1, big)
    }
    assert sorted(r.Descriptor["Mask"] for r in children.values()) == ["1-50", "51-100"]
    (written_off,) = await logged(database, world, "InputWrittenOff")
    assert (written_off.Message, written_off.Data) == (
        "the file is corrupt",
        {"input_id": id_to_str(gone), "by": "operator"},
    )
    assert await statuses(database, world.transformation_id) == {
        "NotProcessed": 1,
        "Split": 1,
        "Unassigned": 2,
    }
    await assert_counters_exact(database)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"write_off": {}}, "reason: say why"),
        ({"reason": "x"}, "decision: give a decision: retry, write_off or split"),
        (
            {"reason": "x", "retry": {"requirements_json": "[1]"}},
            "retry.requirements_json: must be a JSON object",
        ),
        (
            {"reason": "x", "retry": {"requirements_json": "{"}},
            "retry.requirements_json: not valid JSON",
        ),
        ({"reason": "x", "split": {"children_json": "{}"}}, "split.children_json: a JSON list"),
        (
            {"reason": "x", "split": {"children_json": '[{"lfn": "/a", "lfn_size": -1}]'}},
            "split.children_json: [0].lfn_size",
        ),
        (
            {"reason": "x", "split": {"children_json": '[{"descriptor": {"a": 1}}, 7]'}},
            "split.children_json: [1]: expected an object",
        ),
        (
            {
                "reason": "x",
                "split": {
                    "children_json": '[{"lfn": "/a", "lfn_size": 1}, {"lfn": "/a", "lfn_size": 1}]'
                },
            },
            "split.children_json: same lfn and descriptor: item 1 repeats item 0",
        ),
    ],
)
async def test_a_bad_decision_is_refused_in_one_line(
    database: Database,
    world: World,
    stubs: dict[str, Any],
    fields: dict[str, Any],
    said: str,
) -> None:
    (i,) = await failed(database, world, 1)
    request = decide(world, i)
    json_format.ParseDict(fields, request)

    with pytest.raises(InvalidArgument) as refused:
        await stubs["operator"].DecideFailedInput(request)

    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert await statuses(database, world.transformation_id) == {"Failed": 1}


async def test_deciding_an_input_the_transformation_has_not_is_not_found(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    await failed(database, world, 1)
    with pytest.raises(NotFound, match="input"):
        await stubs["operator"].DecideFailedInput(
            decide(world, world.transformation_id, reason="x", retry=execution_pb2.RetryDecision())
        )
    with pytest.raises(InvalidArgument, match="input_id"):
        await stubs["operator"].DecideFailedInput(
            execution_pb2.DecideFailedInputRequest(
                transformation_id=id_to_str(world.transformation_id),
                input_id="not-an-id",
                reason="x",
                retry=execution_pb2.RetryDecision(),
            )
        )
