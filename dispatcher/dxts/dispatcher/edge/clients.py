"""The dispatcher's gRPC clients of the other services, returning domain types: the definition
service (process trees, transformation scopes) and execution (RecordOutcomes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from dxts.core.adaptor import mapping
from dxts.core.adaptor.model import Outcome, OutcomeAck
from dxts.core.errors import Unavailable
from dxts.core.ids import hash_from_str, hash_to_str, id_to_str, new_id
from dxts.v1 import definition_pb2, definition_pb2_grpc, execution_pb2, execution_pb2_grpc


class GrpcDefinitionSource:
    """A DefinitionSource over the definition service (a `dxts.core.grpc.channel` carrying the
    dispatcher's token)."""

    def __init__(self, channel: grpc.aio.Channel, *, timeout_s: float) -> None:
        self._stub = definition_pb2_grpc.DefinitionServiceStub(channel)
        self._timeout_s = timeout_s

    async def process_tree(self, process_id: bytes) -> list[tuple[bytes, str]]:
        reply = await _call(
            self._stub.GetProcessTree(
                definition_pb2.GetProcessTreeRequest(process_id=hash_to_str(process_id)),
                timeout=self._timeout_s,
            )
        )
        return [
            (hash_from_str(p.process_id, field=f"processes[{i}].process_id"), p.document_json)
            for i, p in enumerate(reply.processes)
        ]

    async def transformation_scope(self, transformation_id: bytes) -> tuple[str, str]:
        reply = await _call(
            self._stub.GetTransformation(
                definition_pb2.GetTransformationRequest(
                    transformation_id=id_to_str(transformation_id)
                ),
                timeout=self._timeout_s,
            )
        )
        return reply.transformation.vo, reply.transformation.type


async def _call(call: Any) -> Any:
    """Domain errors pass through (the channel raises them); a status without a domain meaning
    (deadline, internal, unimplemented) means the definition service cannot answer now."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        raise Unavailable(f"the definition service did not answer: {error.details()}") from error


class GrpcOutcomeSink:
    """An OutcomeSink over `ExecutionService.RecordOutcomes`."""

    def __init__(self, channel: grpc.aio.Channel, *, timeout_s: float) -> None:
        self._stub = execution_pb2_grpc.ExecutionServiceStub(channel)
        self._timeout_s = timeout_s

    async def record(self, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        request = execution_pb2.RecordOutcomesRequest(
            request_id=id_to_str(new_id()),
            outcomes=[mapping.outcome_to_proto(o) for o in outcomes],
        )
        try:
            reply = await self._stub.RecordOutcomes(request, timeout=self._timeout_s)
        except grpc.aio.AioRpcError as error:
            raise Unavailable(f"execution did not record outcomes: {error.details()}") from error
        if len(reply.acks) != len(outcomes):
            raise Unavailable(
                f"execution acknowledged {len(reply.acks)} of {len(outcomes)} outcomes"
            )
        return [mapping.ack_from_proto(a) for a in reply.acks]
