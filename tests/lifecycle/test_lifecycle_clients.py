"""The lifecycle's gRPC clients: exact counts from the real accounting service, and the
execution client's requests, paging and parsing against a recording ExecutionService."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from dxts.accounting.component import build_accounting
from dxts.accounting.logic.members import NoMemberLister
from dxts.core.counters import journal_inputs, journal_parcels
from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import Unavailable
from dxts.core.grpc import DevKeys, GrpcServer, Service, channel
from dxts.core.grpc.convert import enum_from_proto, enum_to_proto, json_text
from dxts.core.ids import new_id
from dxts.core.plugins.protocols.lifecycle import CleanMode, Flushed
from dxts.core.schema.definition import ownership, transformation_outputs, transformations
from dxts.core.settings import ServerSettings
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.definition.edge.accounting_client import GrpcCounts, NoCounts
from dxts.definition.edge.execution_client import GrpcExecution, NoExecution
from dxts.v1 import common_pb2, execution_pb2, execution_pb2_grpc

I, P = InputStatus, ParcelStatus  # noqa: E741
SERVICE = ("dxts", "dxts-lifecycle", ["service"])


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> DevKeys:
    return DevKeys.load_or_create(tmp_path_factory.mktemp("keys"))


async def test_counts_come_exact_from_accounting(database: Database, keys: DevKeys) -> None:
    accounting = await build_accounting(database, members=NoMemberLister(), start_sweeps=False)
    tid, other = new_id(), new_id()
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        await journal_inputs(conn, {(tid, None, "Unassigned"): 5})
        await journal_inputs(conn, {(tid, "Unassigned", "Problematic"): 2})
        await journal_parcels(conn, {(tid, None, "Completing"): 1})
    server = GrpcServer(
        accounting.services, settings=ServerSettings(listen="127.0.0.1:0"), verifier=keys.verifier()
    )
    try:
        async with server:
            opened = channel(server.address, token=keys.issue(*SERVICE))
            try:
                counts = GrpcCounts(opened)
                ids = [uuid.UUID(bytes=tid), uuid.UUID(bytes=other)]
                inputs = await counts.inputs(ids)
                assert {s: n for s, n in inputs[ids[0]].items() if n} == {
                    I.UNASSIGNED: 3,
                    I.PROBLEMATIC: 2,
                }
                assert not any(inputs[ids[1]].values())  # unknown: zero everywhere
                parcels = await counts.parcels(ids)
                assert {s: n for s, n in parcels[ids[0]].items() if n} == {P.COMPLETING: 1}
            finally:
                await opened.close()
    finally:
        await accounting.stop()


# -- execution ---------------------------------------------------------------------------------


def parcel_pb(parcel_id: uuid.UUID, status: ParcelStatus, **annotations: Any) -> Any:
    return execution_pb2.Parcel(
        parcel_id=str(parcel_id),
        kind=enum_to_proto(Kind.COMPUTE),  # type: ignore[arg-type]
        status=enum_to_proto(status),  # type: ignore[arg-type]
        backend="local",
        annotations_json=json_text(annotations or None),
    )


class Recording(execution_pb2_grpc.ExecutionServiceServicer):
    """Answers from canned rows, two per page, and keeps every request."""

    def __init__(self, tid: uuid.UUID, output_id: uuid.UUID) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.done, self.partial, self.failed = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        self.inputs = [uuid.uuid4() for _ in range(3)]
        self.parcels = [
            parcel_pb(self.done, P.DONE, usage={"cpu_hours": 1.5}),
            parcel_pb(self.partial, P.PARTIALLY_DONE),
            parcel_pb(self.failed, P.FAILED),
        ]
        self.tid, self.output_id = tid, output_id
        self.cleans = 0

    def _page(self, items: list[Any], token: str) -> tuple[list[Any], str]:
        start = int(token or 0)
        following = str(start + 2) if start + 2 < len(items) else ""
        return items[start : start + 2], following

    async def ListParcels(self, request: Any, context: Any) -> Any:
        self.requests.append(("ListParcels", request))
        wanted = {enum_from_proto(ParcelStatus, s, field="s") for s in request.statuses}
        chosen = [
            p
            for p in self.parcels
            if not wanted or enum_from_proto(ParcelStatus, p.status, field="s") in wanted
        ]
        page, token = self._page(chosen, request.paging.page_token)
        return execution_pb2.ListParcelsResponse(parcels=page, next_page_token=token)

    async def ListInputs(self, request: Any, context: Any) -> Any:
        self.requests.append(("ListInputs", request))
        rows = [
            execution_pb2.Input(
                transformation_id=request.transformation_id,
                input_id=str(i),
                lfn=f"/in/{n}" if n else "",
                lfn_size=10 if n else None,
                descriptor_json="" if n else '{"seed": 0}',
                status=enum_to_proto(I.PROCESSED),  # type: ignore[arg-type]
            )
            for n, i in enumerate(self.inputs)
        ]
        page, token = self._page(rows, request.paging.page_token)
        return execution_pb2.ListInputsResponse(inputs=page, next_page_token=token)

    async def GetParcel(self, request: Any, context: Any) -> Any:
        self.requests.append(("GetParcel", request))
        parcel_id = uuid.UUID(request.parcel_id)
        carried = [execution_pb2.Input(input_id=str(i)) for i in self.inputs[:2]]
        report = {
            str(self.inputs[0]): {"action": "SUCCESS"},
            str(self.inputs[1]): {"action": "FAILURE"},
        }
        outcome = common_pb2.Outcome(
            status_report_json=json.dumps(report) if parcel_id == self.partial else ""
        )
        outputs = [
            execution_pb2.ParcelOutput(
                output_id=str(uuid.uuid4()),
                transformation_output_id=str(self.output_id),
                output_name="reco",
                parcel_id=request.parcel_id,
                lfn=f"/out/{parcel_id}",
                lfn_size=7,
            )
        ]
        return execution_pb2.GetParcelResponse(
            parcel=parcel_pb(parcel_id, P.DONE), inputs=carried, outputs=outputs, outcome=outcome
        )

    async def Flush(self, request: Any, context: Any) -> Any:
        self.requests.append(("Flush", request))
        return execution_pb2.FlushResponse(
            inputs_offered=2, failure="packer raised OSError: full", failure_class="PluginFailed"
        )

    async def CancelParcels(self, request: Any, context: Any) -> Any:
        self.requests.append(("CancelParcels", request))
        return execution_pb2.CancelParcelsResponse()

    async def WriteOffInputs(self, request: Any, context: Any) -> Any:
        self.requests.append(("WriteOffInputs", request))
        return execution_pb2.WriteOffInputsResponse()

    async def CleanTransformation(self, request: Any, context: Any) -> Any:
        self.requests.append(("CleanTransformation", request))
        self.cleans += 1
        return execution_pb2.CleanTransformationResponse(rows_deleted=10, complete=self.cleans > 1)


@pytest.fixture(scope="module")
async def served(
    database: Database, keys: DevKeys
) -> AsyncIterator[tuple[Recording, GrpcExecution]]:
    tid, oid, output_id = new_id(), new_id(), new_id()
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        now = await db_now(conn)
        await conn.execute(sa.insert(ownership).values(OwnershipID=oid, VO="lhcb", Sub="u"))
        await conn.execute(
            sa.insert(transformations).values(
                TransformationID=tid,
                OwnershipID=oid,
                Type="T",
                Kind="Compute",
                Packer="PerInput",
                UpdatedAt=now,
            )
        )
        await conn.execute(
            sa.insert(transformation_outputs).values(
                TransformationOutputID=output_id,
                TransformationID=tid,
                Name="reco",
                Intermediate=True,
            )
        )
    recording = Recording(uuid.UUID(bytes=tid), uuid.UUID(bytes=output_id))
    service = Service.of(
        execution_pb2.DESCRIPTOR.services_by_name["ExecutionService"],
        execution_pb2_grpc.add_ExecutionServiceServicer_to_server,
        recording,
    )
    server = GrpcServer(
        [service], settings=ServerSettings(listen="127.0.0.1:0"), verifier=keys.verifier()
    )
    async with server:
        opened = channel(server.address, token=keys.issue(*SERVICE))
        try:
            yield recording, GrpcExecution(opened, database)
        finally:
            await opened.close()


async def test_parcels_and_inputs_page_through_execution(
    served: tuple[Recording, GrpcExecution],
) -> None:
    recording, client = served
    parcels = [p async for p in client.parcels(recording.tid)]
    assert [p.status for p in parcels] == [P.DONE, P.PARTIALLY_DONE, P.FAILED]
    assert parcels[0].annotations == {"usage": {"cpu_hours": 1.5}}
    assert [p.id for p in parcels if p.status is P.FAILED] == [recording.failed]
    inputs = [i async for i in client.inputs(recording.tid, [I.PROCESSED])]
    assert [(i.lfn, i.descriptor, i.lfn_size) for i in inputs] == [
        (None, {"seed": 0}, None),
        ("/in/1", None, 10),
        ("/in/2", None, 10),
    ]
    (_, request), *_ = [r for r in recording.requests if r[0] == "ListInputs"]
    assert list(request.statuses) == [enum_to_proto(I.PROCESSED)]
    assert request.transformation_id == str(recording.tid)


async def test_outputs_and_successes_read_each_successful_parcel(
    served: tuple[Recording, GrpcExecution],
) -> None:
    recording, client = served
    outputs = [o async for o in client.outputs(recording.tid)]
    assert sorted(o.lfn for o in outputs) == sorted(
        f"/out/{p}" for p in (recording.done, recording.partial)
    )
    assert all(o.intermediate and o.name == "reco" and o.size == 7 for o in outputs)
    produced = [o async for o in client.outputs_of(recording.output_id)]
    assert len(produced) == 2
    assert [o async for o in client.outputs_of(uuid.uuid4())] == []
    successes = [pair async for pair in client.successes(recording.tid)]
    first, second = recording.inputs[:2]
    # A Done parcel processed everything it carried; a PartiallyDone one what its report says.
    assert sorted(successes) == sorted(
        [(recording.done, first), (recording.done, second), (recording.partial, first)]
    )


async def test_control_requests_reach_execution(served: tuple[Recording, GrpcExecution]) -> None:
    recording, client = served
    flushed = await client.flush(recording.tid, request_id="r1")
    assert flushed == Flushed(
        offered=2, failure="packer raised OSError: full", failure_class="PluginFailed"
    )
    await client.cancel_in_flight(recording.tid, request_id="r2", reason="cancelled")
    await client.write_off_waiting(recording.tid, request_id="r3", reason="cancelled")
    first = await client.clean_transformation(recording.tid, CleanMode.CLEAN, request_id="r4")
    second = await client.clean_transformation(recording.tid, CleanMode.ARCHIVE, request_id="r5")
    assert (first.complete, second.complete, second.rows_deleted) == (False, True, 10)
    sent = {name: request for name, request in recording.requests}
    assert sent["Flush"].request_id == "r1"
    assert [
        enum_from_proto(ParcelStatus, s, field="s")
        for s in sent["CancelParcels"].selection.statuses
    ] == [
        P.UNASSIGNED,
        P.RESERVED,
        P.ASSIGNED,
    ]
    assert sent["WriteOffInputs"].reason == "cancelled"
    modes = [r.mode for name, r in recording.requests if name == "CleanTransformation"]
    assert modes == [execution_pb2.CLEAN_MODE_CLEAN, execution_pb2.CLEAN_MODE_ARCHIVE]


async def test_unconfigured_peers_are_unavailable() -> None:
    with pytest.raises(Unavailable, match="DXTS_ACCOUNTING_ADDRESS"):
        await NoCounts().inputs([uuid.uuid4()])
    with pytest.raises(Unavailable, match="DXTS_EXECUTION_ADDRESS"):
        [p async for p in NoExecution().parcels(uuid.uuid4())]
    with pytest.raises(Unavailable, match="DXTS_EXECUTION_ADDRESS"):
        await NoExecution().flush(uuid.uuid4(), request_id="x")
