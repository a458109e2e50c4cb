"""Workgraph members from the definition service over gRPC: the production MemberLister
against a stand-in DefinitionService (its real servicer lives with the definition side), and
GetWorkgraphSummary wired to it end to end, on SQLite and MariaDB."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from accounting_world import SETTINGS

from dxts.accounting import build_accounting
from dxts.accounting.edge.definition_client import DefinitionMemberLister
from dxts.accounting.logic.members import Member
from dxts.core.db import Database
from dxts.core.errors import NotFound, Unauthenticated, Unavailable
from dxts.core.grpc import DevKeys, GrpcServer, Service, channel
from dxts.core.identity import current_identity
from dxts.core.ids import id_to_str, new_id
from dxts.core.settings import ServerSettings
from dxts.core.states import Kind, TransformationStatus, WorkgraphStatus
from dxts.v1 import accounting_pb2, common_pb2, definition_pb2, definition_pb2_grpc
from dxts.v1.accounting_pb2_grpc import AccountingServiceStub

WORKGRAPH = new_id()
MEMBERS = [new_id(), new_id()]


class Definition(definition_pb2_grpc.DefinitionServiceServicer):
    """GetWorkgraph for one known workgraph, ListActiveTransformations by id for its members;
    records who asked, and how many ids each listing carried."""

    def __init__(self) -> None:
        self.callers: list[str] = []
        self.listed: list[int] = []

    async def ListActiveTransformations(
        self, request: definition_pb2.ListActiveTransformationsRequest, context: Any
    ) -> definition_pb2.ListActiveTransformationsResponse:
        self.callers.append(current_identity().sub)
        self.listed.append(len(request.transformation_ids))
        known = {id_to_str(t) for t in MEMBERS}
        return definition_pb2.ListActiveTransformationsResponse(
            transformations=[
                definition_pb2.Transformation(transformation_id=t)
                for t in request.transformation_ids
                if t in known
            ]
        )

    async def GetWorkgraph(
        self, request: definition_pb2.GetWorkgraphRequest, context: Any
    ) -> definition_pb2.GetWorkgraphResponse:
        self.callers.append(current_identity().sub)
        if request.workgraph_id != id_to_str(WORKGRAPH):
            raise NotFound("workgraph", request.workgraph_id)
        return definition_pb2.GetWorkgraphResponse(
            workgraph=definition_pb2.Workgraph(
                workgraph_id=request.workgraph_id,
                status=common_pb2.WORKGRAPH_STATUS_FINALIZING,
                transformation_ids=[id_to_str(t) for t in MEMBERS],
            ),
            members=[
                definition_pb2.Transformation(
                    transformation_id=id_to_str(MEMBERS[0]),
                    workgraph_id=request.workgraph_id,
                    step="simulate",
                    kind=common_pb2.KIND_COMPUTE,
                    status=common_pb2.TRANSFORMATION_STATUS_FINALIZED,
                ),
                definition_pb2.Transformation(
                    transformation_id=id_to_str(MEMBERS[1]),
                    workgraph_id=request.workgraph_id,
                    step="replicate",
                    kind=common_pb2.KIND_DATA,
                    status=common_pb2.TRANSFORMATION_STATUS_FINALIZING,
                ),
            ],
        )


@pytest.fixture(scope="module")
def definition() -> Definition:
    return Definition()


@pytest.fixture(scope="module")
async def definition_server(definition: Definition, dev_keys: DevKeys) -> AsyncIterator[GrpcServer]:
    running = GrpcServer(
        [
            Service.of(
                definition_pb2.DESCRIPTOR.services_by_name["DefinitionService"],
                definition_pb2_grpc.add_DefinitionServiceServicer_to_server,
                definition,
            )
        ],
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=dev_keys.verifier(),
    )
    async with running:
        yield running


async def test_the_lister_forwards_the_callers_token(
    definition: Definition, definition_server: GrpcServer, user_token: str
) -> None:
    async with channel(definition_server.address) as ch:
        lister = DefinitionMemberLister(ch, definition_server.address)
        found = await lister.workgraph(WORKGRAPH, token=user_token)
        assert definition.callers[-1] == "ursula"
        assert found.workgraph_id == WORKGRAPH
        assert found.status is WorkgraphStatus.FINALIZING
        assert found.members == (
            Member(MEMBERS[0], "simulate", Kind.COMPUTE, TransformationStatus.FINALIZED),
            Member(MEMBERS[1], "replicate", Kind.DATA, TransformationStatus.FINALIZING),
        )
        with pytest.raises(NotFound):
            await lister.workgraph(new_id(), token=user_token)
        with pytest.raises(Unauthenticated):
            await lister.workgraph(WORKGRAPH, token=None)


async def test_a_callers_transformations_are_checked_in_one_call(
    definition: Definition, definition_server: GrpcServer, user_token: str
) -> None:
    async with channel(definition_server.address) as ch:
        lister = DefinitionMemberLister(ch, definition_server.address)
        definition.listed.clear()
        await lister.check_transformations([*MEMBERS, MEMBERS[0]], token=user_token)
        assert definition.listed == [2]  # one call, each id once
        assert definition.callers[-1] == "ursula"
        stranger = new_id()
        with pytest.raises(NotFound, match=id_to_str(stranger)):
            await lister.check_transformations([MEMBERS[0], stranger], token=user_token)


async def test_a_server_without_the_definition_service_is_unavailable(
    definition_server: GrpcServer, dev_keys: DevKeys, user_token: str
) -> None:
    elsewhere = GrpcServer(
        [], settings=ServerSettings(listen="127.0.0.1:0"), verifier=dev_keys.verifier()
    )
    async with elsewhere, channel(elsewhere.address) as ch:
        lister = DefinitionMemberLister(ch, elsewhere.address)
        with pytest.raises(Unavailable):
            await lister.workgraph(WORKGRAPH, token=user_token)


async def test_summary_through_the_definition_service(
    database: Database, definition: Definition, definition_server: GrpcServer, dev_keys: DevKeys
) -> None:
    settings = SETTINGS.model_copy(update={"definition_address": definition_server.address})
    accounting = await build_accounting(database, settings=settings, start_sweeps=False)
    server = GrpcServer(
        accounting.services,
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=dev_keys.verifier(),
    )
    token = dev_keys.issue("lhcb", "shifter-sam", ["user"])
    try:
        async with server, channel(server.address, token=token) as ch:
            reply = await AccountingServiceStub(ch).GetWorkgraphSummary(
                accounting_pb2.GetWorkgraphSummaryRequest(workgraph_id=id_to_str(WORKGRAPH))
            )
            with pytest.raises(NotFound):
                await AccountingServiceStub(ch).GetWorkgraphSummary(
                    accounting_pb2.GetWorkgraphSummaryRequest(workgraph_id=id_to_str(new_id()))
                )
    finally:
        await accounting.stop()
    assert definition.callers[-2:] == ["shifter-sam", "shifter-sam"]
    assert reply.status == common_pb2.WORKGRAPH_STATUS_FINALIZING
    assert [(m.step, m.status) for m in reply.members] == [
        ("simulate", common_pb2.TRANSFORMATION_STATUS_FINALIZED),
        ("replicate", common_pb2.TRANSFORMATION_STATUS_FINALIZING),
    ]
    # Nothing was ever counted for them: every status reads zero.
    for member in reply.members:
        assert {c.count for c in member.input_counts} == {0}
        assert len(member.input_counts) == 7 and len(member.parcel_counts) == 8
