"""The gRPC sides of the dispatcher's two dependencies, against stand-in servicers over real
gRPC: process trees and scopes from DefinitionService, outcomes into ExecutionService, and what
their failures become (domain errors pass through, an unanswered call is Unavailable)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from dispatch_support import Keys

from dxts.core.adaptor.model import Outcome
from dxts.core.errors import NotFound, Unavailable
from dxts.core.grpc import GrpcServer, Service, channel
from dxts.core.ids import content_hash, hash_to_str, id_to_str, new_id
from dxts.core.settings import ServerSettings
from dxts.dispatcher.edge.clients import GrpcDefinitionSource, GrpcOutcomeSink
from dxts.v1 import (
    common_pb2,
    definition_pb2,
    definition_pb2_grpc,
    execution_pb2,
    execution_pb2_grpc,
)

CHILD = {"class": "CommandLineTool", "baseCommand": "true", "inputs": {}, "outputs": {}}
CHILD_ID = content_hash(CHILD)
ROOT = {"class": "Workflow", "steps": {"a": {"run": f"proc:sha256-{CHILD_ID.hex()}"}}}
ROOT_ID = content_hash(ROOT)


class Definition(definition_pb2_grpc.DefinitionServiceServicer):
    async def GetProcessTree(self, request: Any, context: Any) -> Any:
        if request.process_id != hash_to_str(ROOT_ID):
            raise NotFound("process", request.process_id)
        return definition_pb2.GetProcessTreeResponse(
            root_process_id=request.process_id,
            processes=[
                definition_pb2.Process(process_id=hash_to_str(CHILD_ID), document_json="{}"),
                definition_pb2.Process(process_id=hash_to_str(ROOT_ID), document_json="{}"),
            ],
        )

    async def GetTransformation(self, request: Any, context: Any) -> Any:
        return definition_pb2.GetTransformationResponse(
            transformation=definition_pb2.Transformation(
                transformation_id=request.transformation_id, vo="lhcb", type="Sprucing"
            )
        )


class Execution(execution_pb2_grpc.ExecutionServiceServicer):
    def __init__(self) -> None:
        self.slow = False

    async def RecordOutcomes(self, request: Any, context: Any) -> Any:
        if self.slow:
            await asyncio.sleep(5)
        return execution_pb2.RecordOutcomesResponse(
            acks=[
                common_pb2.OutcomeAck(
                    parcel_id=o.parcel_id,
                    disposition=common_pb2.OUTCOME_DISPOSITION_RECORDED,
                )
                for o in request.outcomes
            ]
        )


@pytest.fixture
async def servers(keys: Keys) -> AsyncIterator[tuple[str, Execution]]:
    execution = Execution()
    server = GrpcServer(
        [
            Service.of(
                definition_pb2.DESCRIPTOR.services_by_name["DefinitionService"],
                definition_pb2_grpc.add_DefinitionServiceServicer_to_server,
                Definition(),
            ),
            Service.of(
                execution_pb2.DESCRIPTOR.services_by_name["ExecutionService"],
                execution_pb2_grpc.add_ExecutionServiceServicer_to_server,
                execution,
            ),
        ],
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=keys.keys.verifier(),
    )
    await server.start()
    yield server.address, execution
    await server.stop(grace=0)


async def test_trees_and_scopes_come_from_the_definition_service(
    servers: tuple[str, Execution], keys: Keys
) -> None:
    address, _ = servers
    async with channel(address, token=keys.token) as ch:
        source = GrpcDefinitionSource(ch, timeout_s=5)
        tree = await source.process_tree(ROOT_ID)
        assert [pid for pid, _ in tree] == [CHILD_ID, ROOT_ID]
        assert await source.transformation_scope(new_id()) == ("lhcb", "Sprucing")
        with pytest.raises(NotFound):
            await source.process_tree(CHILD_ID)


async def test_outcomes_go_to_the_execution_service(
    servers: tuple[str, Execution], keys: Keys
) -> None:
    address, execution = servers
    outcomes = [Outcome(parcel_id=id_to_str(new_id())) for _ in range(3)]
    async with channel(address, token=keys.token) as ch:
        sink = GrpcOutcomeSink(ch, timeout_s=0.3)
        acks = await sink.record(outcomes)
        assert [a.parcel_id for a in acks] == [o.parcel_id for o in outcomes]
        execution.slow = True
        with pytest.raises(Unavailable):
            await sink.record(outcomes)
