"""ListInputs, GetInput, ListParcels, GetParcel and Flush over a real in-process gRPC server (the
component as `build_execution` makes it), on SQLite and MariaDB."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import runner_support as s
import sqlalchemy as sa
from definition_double import InMemoryTransformations

from dxts.core.catalogue import CatalogueSettings, LocalFileCatalogue
from dxts.core.db import Database, db_now
from dxts.core.errors import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from dxts.core.grpc import DevKeys, GrpcServer, Service, channel
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.grpc.ports import free_port
from dxts.core.identity import current_identity
from dxts.core.ids import hash_to_str, id_to_str, input_hash, new_id
from dxts.core.locks import LockManager
from dxts.core.schema import execution, metadata
from dxts.core.settings import ServerSettings
from dxts.core.states import InputStatus, Kind, ParcelStatus, TransformationStatus
from dxts.execution.component import Execution, build_execution
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import packer_lock, run_packer
from dxts.execution.logic.transformations import Description
from dxts.execution.settings import ExecutionSettings
from dxts.v1 import (
    common_pb2,
    definition_pb2,
    definition_pb2_grpc,
    execution_pb2,
    execution_pb2_grpc,
)

CALLERS = {
    "alice": ("lhcb", "alice", []),  # owns the transformations
    "bob": ("lhcb", "bob", []),  # same VO, owns nothing
    "operator": ("lhcb", "olga", ["operator"]),
    "carol": ("belle", "carol", []),  # another VO
    "service": ("dxts", "dxts-dispatcher", ["service"]),
}
RC = s.RC


class ByVO(InMemoryTransformations):
    """Definition's rule: a transformation is seen by its VO and by dxts's components."""

    async def describe(self, transformation_id: bytes, *, token: str | None) -> Description:
        found = await super().describe(transformation_id, token=token)
        identity = current_identity()
        if identity.vo != found.vo and not identity.has_role("service"):
            raise NotFound("transformation", id_to_str(transformation_id))
        return found


def number(member: Any) -> Any:
    return enum_to_proto(member)


def listed(n: int) -> dict[str, Any]:
    return {"inputs": [{"lfn": f"/lhcb/g/{i:03d}", "lfn_size": i} for i in range(n)]}


@pytest.fixture(scope="module")
def definitions(database: Database) -> ByVO:
    return ByVO(database=database)


@pytest.fixture(scope="module")
async def component(
    database: Database, definitions: ByVO, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Execution]:
    folder = tmp_path_factory.mktemp("catalogue")
    catalogue = LocalFileCatalogue(CatalogueSettings(url=f"sqlite+aiosqlite:///{folder}/c.sqlite"))
    await catalogue.start()
    execution_component = await build_execution(
        database,
        settings=ExecutionSettings(),
        registry=s.registry({}),
        catalogue=catalogue,
        definition_client=definitions,
        start_sweeps=False,
    )
    try:
        yield execution_component
    finally:
        await execution_component.stop()
        await catalogue.close()


@pytest.fixture(scope="module")
async def stubs(
    component: Execution, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, Any]]:
    keys = DevKeys.load_or_create(tmp_path_factory.mktemp("keys"))
    server = GrpcServer(
        component.services,
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=keys.verifier(),
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


async def made(database: Database, definitions: ByVO, n: int, **options: Any) -> Any:
    plugins = s.registry({})
    t = await s.transformation(database, feeder="List", feeder_args=listed(n), **options)
    definitions.put(t)
    await run_feeder(database, plugins, replace(t, feeder_enabled=True))
    return replace(t, feeder_enabled=False)


async def test_inputs_page_by_key_with_filters(
    database: Database, definitions: ByVO, stubs: dict[str, Any]
) -> None:
    t = await made(database, definitions, 5)
    await run_packer(database, s.registry({}), t)
    rows = await s.input_rows(database, t.id)
    tid = id_to_str(t.id)
    seen, token = [], ""
    while True:
        reply = await stubs["bob"].ListInputs(
            execution_pb2.ListInputsRequest(
                transformation_id=tid, paging=common_pb2.Paging(page_size=2, page_token=token)
            )
        )
        seen.append([i.lfn for i in reply.inputs])
        token = reply.next_page_token
        if not token:
            break
    assert seen == [["/lhcb/g/000", "/lhcb/g/001"], ["/lhcb/g/002", "/lhcb/g/003"], ["/lhcb/g/004"]]
    first = (
        await stubs["bob"].ListInputs(execution_pb2.ListInputsRequest(transformation_id=tid))
    ).inputs[0]
    assert (first.input_id, first.lfn_size, first.status) == (
        id_to_str(rows[0].InputID),
        0,
        number(InputStatus.ASSIGNED),
    )
    assert first.last_parcel_id == id_to_str(rows[0].LastParcelID)
    by_lfn = await stubs["bob"].ListInputs(
        execution_pb2.ListInputsRequest(transformation_id=tid, lfn="/lhcb/g/003")
    )
    assert [i.lfn for i in by_lfn.inputs] == ["/lhcb/g/003"]
    none = await stubs["bob"].ListInputs(
        execution_pb2.ListInputsRequest(
            transformation_id=tid, statuses=[number(InputStatus.UNASSIGNED)]
        )
    )
    assert list(none.inputs) == []
    page = await stubs["bob"].ListInputs(
        execution_pb2.ListInputsRequest(
            transformation_id=tid, paging=common_pb2.Paging(page_size=1)
        )
    )
    with pytest.raises(InvalidArgument, match="different filters"):
        await stubs["bob"].ListInputs(
            execution_pb2.ListInputsRequest(
                transformation_id=tid,
                lfn="/lhcb/g/001",
                paging=common_pb2.Paging(page_size=1, page_token=page.next_page_token),
            )
        )
    with pytest.raises(NotFound):
        await stubs["carol"].ListInputs(execution_pb2.ListInputsRequest(transformation_id=tid))
    with pytest.raises(InvalidArgument, match="transformation_id"):
        await stubs["bob"].ListInputs(execution_pb2.ListInputsRequest())


async def test_an_input_with_its_parcels_parent_and_children(
    database: Database, definitions: ByVO, stubs: dict[str, Any]
) -> None:
    t = await made(database, definitions, 1)
    await run_packer(database, s.registry({}), t)
    (parent,) = await s.input_rows(database, t.id)
    child_id = new_id()
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.insert(execution.inputs).values(
                TransformationID=t.id,
                InputID=child_id,
                ParentInputID=parent.InputID,
                InputHash=input_hash("/lhcb/g/000", {"Mask": "1-5"}),
                LFN="/lhcb/g/000",
                LFNSize=0,
                Descriptor={"Mask": "1-5"},
                UpdatedAt=await db_now(conn),
            )
        )
    tid = id_to_str(t.id)
    reply = await stubs["alice"].GetInput(
        execution_pb2.GetInputRequest(transformation_id=tid, input_id=id_to_str(parent.InputID))
    )
    assert [p.parcel_id for p in reply.parcels] == [id_to_str(parent.LastParcelID)]
    assert [c.input_id for c in reply.children] == [id_to_str(child_id)]
    assert not reply.HasField("parent")
    child = await stubs["alice"].GetInput(
        execution_pb2.GetInputRequest(transformation_id=tid, input_id=id_to_str(child_id))
    )
    assert child.parent.input_id == id_to_str(parent.InputID)
    assert json.loads(child.input.descriptor_json) == {"Mask": "1-5"}
    # The child's history before it existed: the parcel that carried its parent.
    assert [p.parcel_id for p in child.inherited_parcels] == [id_to_str(parent.LastParcelID)]
    assert not child.parcels and not reply.inherited_parcels
    children = await stubs["alice"].ListInputs(
        execution_pb2.ListInputsRequest(
            transformation_id=tid, parent_input_id=id_to_str(parent.InputID)
        )
    )
    assert [c.input_id for c in children.inputs] == [id_to_str(child_id)]
    with pytest.raises(NotFound):
        await stubs["alice"].GetInput(
            execution_pb2.GetInputRequest(transformation_id=tid, input_id=id_to_str(new_id()))
        )
    with pytest.raises(NotFound):
        await stubs["carol"].GetInput(
            execution_pb2.GetInputRequest(transformation_id=tid, input_id=id_to_str(child_id))
        )


async def test_parcels_listed_and_shown_with_facet_inputs_outputs_and_outcome(
    database: Database, definitions: ByVO, stubs: dict[str, Any]
) -> None:
    t = await made(
        database, definitions, 3, outputs=["out"], annotations={"driving_input": "input-data"}
    )
    await run_packer(database, s.registry({}), t)
    rows = await s.input_rows(database, t.id)
    parcel_id = bytes(rows[0].LastParcelID)
    outcome = {
        "parcel_id": id_to_str(parcel_id),
        "backend": "null",
        "result": "OUTCOME_RESULT_SUCCEEDED",
    }
    async with database.transaction(RC) as conn:
        parcels = execution.parcels
        await conn.execute(
            sa.update(parcels)
            .where(parcels.c.ParcelID == parcel_id)
            .values(Annotations={"outcome": outcome})
        )
        await conn.execute(
            sa.insert(execution.backend_ids).values(
                ParcelID=parcel_id, Adaptor="null", Identifier=new_id()
            )
        )
        await conn.execute(
            sa.insert(execution.parcel_outputs).values(
                TransformationOutputID=t.outputs[0].output_id,
                OutputID=new_id(),
                ParcelID=parcel_id,
                LFN="/lhcb/g/out/000",
                LFNSize=7,
            )
        )
    tid = id_to_str(t.id)
    listed_parcels = await stubs["bob"].ListParcels(
        execution_pb2.ListParcelsRequest(
            transformation_id=tid,
            statuses=[number(ParcelStatus.UNASSIGNED)],
            kind=number(Kind.COMPUTE),
            process_id=hash_to_str(t.process_id),
        )
    )
    assert len(listed_parcels.parcels) == 3
    reply = await stubs["bob"].GetParcel(
        execution_pb2.GetParcelRequest(parcel_id=id_to_str(parcel_id))
    )
    assert reply.parcel.transformation_id == tid and reply.WhichOneof("facet") == "compute"
    assert reply.compute.process_id == hash_to_str(t.process_id)
    assert json.loads(reply.compute.parameters_json) == {
        "input-data": [{"class": "File", "location": "lfn:/lhcb/g/000", "size": 0}]
    }
    assert [i.lfn for i in reply.inputs] == ["/lhcb/g/000"]
    assert [(o.lfn, o.output_name, o.lfn_size) for o in reply.outputs] == [
        ("/lhcb/g/out/000", "out", 7)
    ]
    assert reply.identifier and reply.outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED
    with pytest.raises(NotFound):
        await stubs["carol"].GetParcel(
            execution_pb2.GetParcelRequest(parcel_id=id_to_str(parcel_id))
        )
    with pytest.raises(NotFound):
        await stubs["bob"].GetParcel(execution_pb2.GetParcelRequest(parcel_id=id_to_str(new_id())))


async def test_a_data_parcel_shows_its_request_and_deltas(
    database: Database, definitions: ByVO, stubs: dict[str, Any]
) -> None:
    t = await made(
        database,
        definitions,
        2,
        kind=Kind.DATA,
        packer="BySize",
        packer_args={"group_size": 2},
        annotations={"data_management": {"operation": "replicate", "destination": ["CERN-DST"]}},
    )
    await run_packer(database, s.registry({}), t)
    (row, _) = await s.input_rows(database, t.id)
    reply = await stubs["alice"].GetParcel(
        execution_pb2.GetParcelRequest(parcel_id=id_to_str(row.LastParcelID))
    )
    assert reply.WhichOneof("facet") == "data"
    assert json.loads(reply.data.request_json)["Operations"][0]["Type"] == "ReplicateAndRegister"
    assert [(d.storage_element, d.files_added, d.bytes_added) for d in reply.data.deltas] == [
        ("CERN-DST", 2, 1)
    ]


async def test_listing_across_transformations_is_for_components(
    database: Database, definitions: ByVO, stubs: dict[str, Any]
) -> None:
    user_parcel = new_id()
    async with database.transaction(RC) as conn:
        now = await db_now(conn)
        await conn.execute(
            sa.insert(execution.parcels).values(
                ParcelID=user_parcel, Kind="Compute", Status="Unassigned", UpdatedAt=now
            )
        )
        await conn.execute(
            sa.insert(execution.user_parcels).values(ParcelID=user_parcel, VO="lhcb", Sub="bob")
        )
    mine = await stubs["alice"].ListParcels(execution_pb2.ListParcelsRequest())
    assert [p.parcel_id for p in mine.parcels] == [id_to_str(user_parcel)]
    assert (
        list((await stubs["carol"].ListParcels(execution_pb2.ListParcelsRequest())).parcels) == []
    )
    everything = await stubs["service"].ListParcels(
        execution_pb2.ListParcelsRequest(paging=common_pb2.Paging(page_size=1000))
    )
    assert len(everything.parcels) > 1
    shown = await stubs["bob"].GetParcel(
        execution_pb2.GetParcelRequest(parcel_id=id_to_str(user_parcel))
    )
    assert (shown.vo, shown.owner_sub) == ("lhcb", "bob")
    with pytest.raises(NotFound):
        await stubs["carol"].GetParcel(
            execution_pb2.GetParcelRequest(parcel_id=id_to_str(user_parcel))
        )


async def test_flush_packs_what_the_packer_holds_back(
    database: Database, definitions: ByVO, stubs: dict[str, Any], component: Execution
) -> None:
    t = await made(database, definitions, 5, packer="BySize", packer_args={"group_size": 2})
    definitions.put(replace(t, feeder_enabled=True))  # more may come: the packer holds back
    held = await run_packer(database, s.registry({}), replace(t, feeder_enabled=True))
    assert (held.parcels, held.assigned) == (2, 4)
    request = execution_pb2.FlushRequest(transformation_id=id_to_str(t.id), request_id="r1")
    with pytest.raises(PermissionDenied):
        await stubs["bob"].Flush(request)
    with pytest.raises(NotFound):
        await stubs["carol"].Flush(request)
    sweep = LockManager(database)
    try:
        async with sweep.try_hold(packer_lock(t.id)) as busy:  # a sweep is running it
            assert busy
            with pytest.raises(Aborted, match="busy"):
                await stubs["alice"].Flush(request, timeout=2.0)
    finally:
        await sweep.dispose()
    reply = await stubs["alice"].Flush(request)
    assert (reply.inputs_offered, reply.parcels_created, reply.inputs_assigned) == (1, 1, 1)
    assert reply.failure == ""
    assert s.by_status(await s.input_rows(database, t.id)) == {"Assigned": 5}
    definitions.update(t.id, status=TransformationStatus.PAUSED)
    with pytest.raises(FailedPrecondition, match="Paused"):
        await stubs["operator"].Flush(request)
    definitions.update(t.id, status=TransformationStatus.ACTIVE, halted=True)
    with pytest.raises(FailedPrecondition, match="halted"):
        await stubs["operator"].Flush(request)


async def test_a_flush_whose_packer_fails_answers_the_failure_and_logs_it(
    database: Database, definitions: ByVO, stubs: dict[str, Any], component: Execution
) -> None:
    """ByPartner on a step that joins nothing raises when it runs: the flush's reply says so, in
    the packer's words and with the failure's class, and the member's log has it (a flush's)."""
    t = await made(database, definitions, 2, packer="ByPartner")
    request = execution_pb2.FlushRequest(transformation_id=id_to_str(t.id), request_id="f1")
    reply = await stubs["alice"].Flush(request)
    assert reply.failure_class == "PluginFailed"
    assert "name the partner's step input (partner_input)" in reply.failure
    assert (reply.inputs_offered, reply.parcels_created) == (0, 0)
    again = await stubs["alice"].Flush(request)  # the same request: the recorded answer
    assert (again.failure, again.failure_class) == (reply.failure, reply.failure_class)
    logged = [r for r in await s.log_rows(database, t.id) if r.EventType == "PackerFailed"]
    assert [(r.Message, r.Data) for r in logged] == [
        (reply.failure, {"packer": "ByPartner", "error": "PluginFailed", "flush": True})
    ]


async def test_reset_feeders_lets_an_exhausted_feeder_run_again(
    database: Database, definitions: ByVO, stubs: dict[str, Any], component: Execution
) -> None:
    t = await made(database, definitions, 3)  # the List feeder said NoMoreInputs
    assert await s.feeder_row(database, t.id) == ({"next": 3}, True)
    plugins = s.registry({})
    running = replace(t, feeder_enabled=True)
    skipped = await run_feeder(database, plugins, running)
    assert (skipped.batches, skipped.yielded, skipped.exhausted) == (0, 0, False)  # not run
    request = execution_pb2.ResetFeedersRequest(transformation_ids=[id_to_str(t.id)])
    with pytest.raises(PermissionDenied):
        await stubs["bob"].ResetFeeders(request)
    with pytest.raises(NotFound):
        await stubs["carol"].ResetFeeders(request)
    assert (await stubs["alice"].ResetFeeders(request)).reset_count == 1
    assert await s.feeder_row(database, t.id) == ({"next": 3}, False)  # from its bookmark
    again = await run_feeder(database, plugins, running)
    assert (again.batches, again.inserted, again.exhausted) == (1, 0, True)  # ran, said it again
    request.clear_bookmarks = True
    assert (await stubs["alice"].ResetFeeders(request)).reset_count == 1
    assert await s.feeder_row(database, t.id) == (None, False)  # from the beginning
    anew = await run_feeder(database, plugins, running)
    assert (anew.yielded, anew.inserted, anew.exhausted) == (3, 0, True)  # duplicates


# -- dxts-execution as a process -----------------------------------------------------------------

ENTRY_POINT = Path(sys.executable).parent / "dxts-execution"


class FakeDefinition(definition_pb2_grpc.DefinitionServiceServicer):
    """The two calls execution makes of the definition side, answered from the database."""

    def __init__(self, database: Database, record: Any) -> None:
        self.database = database
        self.record = record

    async def _message(self) -> definition_pb2.Transformation:
        row = await s.transformation_row(self.database, self.record.id)
        return definition_pb2.Transformation(
            transformation_id=id_to_str(self.record.id),
            type="Test",
            kind=number(Kind.COMPUTE),
            status=number(TransformationStatus.ACTIVE),
            vo=self.record.vo,
            owner_sub=self.record.owner_sub,
            feeder=self.record.feeder,
            feeder_args_json=json.dumps(self.record.feeder_args),
            feeder_enabled=bool(row.FeederEnabled),
            packer=self.record.packer,
            process_id=hash_to_str(self.record.process_id),
            requirements_template_json=json.dumps(self.record.requirements_template),
        )

    async def ListActiveTransformations(
        self, request: Any, context: Any
    ) -> definition_pb2.ListActiveTransformationsResponse:
        return definition_pb2.ListActiveTransformationsResponse(
            transformations=[await self._message()]
        )

    async def GetTransformation(
        self, request: Any, context: Any
    ) -> definition_pb2.GetTransformationResponse:
        return definition_pb2.GetTransformationResponse(transformation=await self._message())


async def test_the_entry_point_feeds_packs_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'dxts.sqlite'}"
    database = Database(url)
    await database.start()
    async with database.engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    record = await s.transformation(database, feeder_args=listed(3))
    keys = DevKeys.load_or_create(tmp_path / "data")
    definition = GrpcServer(
        [
            Service.of(
                definition_pb2.DESCRIPTOR.services_by_name["DefinitionService"],
                definition_pb2_grpc.add_DefinitionServiceServicer_to_server,
                FakeDefinition(database, record),
            )
        ],
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=keys.verifier(),
    )
    address = f"127.0.0.1:{free_port()}"
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("DXTS_")
    } | {
        "DXTS_DB_URL": url,
        "DXTS_LISTEN": address,
        "DXTS_DATA_DIR": str(tmp_path / "data"),
        "DXTS_CATALOGUE_URL": f"sqlite+aiosqlite:///{tmp_path / 'catalogue.sqlite'}",
        "DXTS_SHUTDOWN_GRACE_S": "1",
        "DXTS_EXECUTION_FEED_INTERVAL_S": "0.1",
        "DXTS_EXECUTION_PACK_INTERVAL_S": "0.1",
    }
    async with definition:
        environment["DXTS_DEFINITION_ADDRESS"] = definition.address
        process = await asyncio.create_subprocess_exec(
            str(ENTRY_POINT),
            env=environment,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            for _ in range(600):  # a bound: the process starts, feeds and packs in a few rounds
                assert process.returncode is None, "dxts-execution exited early"
                rows = await s.input_rows(database, record.id)
                if len(rows) == 3 and s.by_status(rows) == {"Assigned": 3}:
                    break
                await asyncio.sleep(0.05)
            assert s.by_status(await s.input_rows(database, record.id)) == {"Assigned": 3}
            token = keys.issue("lhcb", "alice", [])
            async with channel(address, token=token) as ch:
                reply = await execution_pb2_grpc.ExecutionServiceStub(ch).ListInputs(  # type: ignore[misc]
                    execution_pb2.ListInputsRequest(transformation_id=id_to_str(record.id))
                )
            assert [i.lfn for i in reply.inputs] == ["/lhcb/g/000", "/lhcb/g/001", "/lhcb/g/002"]
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            _, errors = await asyncio.wait_for(process.communicate(), timeout=30)
    await database.dispose()
    assert process.returncode == 0, errors.decode()
    assert "signal received: stopping" in errors.decode()


async def test_the_entry_point_refuses_to_start_without_the_definition_service(
    tmp_path: Path,
) -> None:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("DXTS_")
    } | {
        "DXTS_DB_URL": f"sqlite+aiosqlite:///{tmp_path / 'dxts.sqlite'}",
        "DXTS_DATA_DIR": str(tmp_path / "data"),
        "DXTS_CATALOGUE_URL": f"sqlite+aiosqlite:///{tmp_path / 'catalogue.sqlite'}",
    }
    process = await asyncio.create_subprocess_exec(
        str(ENTRY_POINT),
        env=environment,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, errors = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 1
    assert "DXTS_DEFINITION_ADDRESS is not set" in errors.decode()


async def test_packed_parcels_have_handles_resolved_in_the_callers_vo(
    database: Database, definitions: ByVO, stubs: dict[str, Any]
) -> None:
    """Issue 32: the packer's batch numbers its parcels (p-N) in the statement style of the
    batch; ResolveParcelName takes the handle, the id or a prefix of it, within the caller's VO."""
    t = await made(database, definitions, 3, annotations={"driving_input": "input-data"})
    await run_packer(database, s.registry({}), t)
    listed_parcels = await stubs["bob"].ListParcels(
        execution_pb2.ListParcelsRequest(transformation_id=id_to_str(t.id))
    )
    handles = [p.handle for p in listed_parcels.parcels]
    assert len(set(handles)) == 3 and all(h.startswith("p-") for h in handles), handles
    numbers = [int(h.removeprefix("p-")) for h in handles]
    assert numbers == sorted(numbers)  # numbered in the batch's (id) order
    first = listed_parcels.parcels[0]
    for name in (first.handle, first.handle.upper(), first.parcel_id, first.parcel_id[:-1]):
        found = await stubs["bob"].ResolveParcelName(
            execution_pb2.ResolveParcelNameRequest(name=name)
        )
        assert (found.parcel_id, found.handle) == (first.parcel_id, first.handle), name
    shown = await stubs["bob"].GetParcel(execution_pb2.GetParcelRequest(parcel_id=first.parcel_id))
    assert shown.parcel.handle == first.handle
    for name in (first.handle, first.parcel_id):
        with pytest.raises(NotFound):
            await stubs["carol"].ResolveParcelName(
                execution_pb2.ResolveParcelNameRequest(name=name)
            )
    with pytest.raises(NotFound):
        await stubs["bob"].ResolveParcelName(execution_pb2.ResolveParcelNameRequest(name="p-0"))
    with pytest.raises(InvalidArgument):
        await stubs["bob"].ResolveParcelName(execution_pb2.ResolveParcelNameRequest(name="wg-1"))
