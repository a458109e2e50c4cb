"""`BackendAdaptorService` over any `Adaptor`: requests to domain calls and results to replies,
and a Poll reply kept under gRPC's message limit. Every adaptor is served through this one
servicer."""

from __future__ import annotations

from typing import Any

from dxts.backends.logic.adaptor import Adaptor
from dxts.core.adaptor import mapping
from dxts.core.adaptor.model import MAX_LOG_BYTES
from dxts.core.grpc import Service
from dxts.v1 import backend_pb2, backend_pb2_grpc

# The most a Poll reply carries, under gRPC's default 4 MiB a message: outcomes of parcels of
# many inputs carry large status reports, and a reply over the limit is refused whole by the
# dispatcher, which would ask for the same outcomes again and again.
POLL_REPLY_BYTES = 3 * 1024 * 1024


def bounded_poll(reply: backend_pb2.PollResponse, limit: int) -> backend_pb2.PollResponse:
    """`reply` with as many of its outcomes as fit in `limit` bytes (at least one): an outcome
    left out is reported by a later Poll, as every terminal outcome is reported again."""
    if reply.ByteSize() <= limit:
        return reply
    kept = backend_pb2.PollResponse(unknown_identifiers=reply.unknown_identifiers)
    size = kept.ByteSize()
    for outcome in reply.outcomes:
        size += outcome.ByteSize() + 6  # the field's tag and length prefix, at most
        if size > limit and kept.outcomes:
            break
        kept.outcomes.append(outcome)
    return kept


class AdaptorServicer(backend_pb2_grpc.BackendAdaptorServiceServicer):
    def __init__(self, adaptor: Adaptor) -> None:
        self.adaptor = adaptor

    async def Describe(
        self, request: backend_pb2.DescribeRequest, context: Any
    ) -> backend_pb2.DescribeResponse:
        return mapping.description_to_proto(await self.adaptor.describe())

    async def Submit(
        self, request: backend_pb2.SubmitRequest, context: Any
    ) -> backend_pb2.SubmitResponse:
        results = await self.adaptor.submit(
            mapping.payload_from_proto(request.payload),
            [mapping.submission_from_proto(p) for p in request.parcels],
        )
        return backend_pb2.SubmitResponse(
            results=[mapping.submit_result_to_proto(r) for r in results]
        )

    async def Poll(
        self, request: backend_pb2.PollRequest, context: Any
    ) -> backend_pb2.PollResponse:
        reply = mapping.poll_to_proto(await self.adaptor.poll(list(request.identifiers)))
        return bounded_poll(reply, POLL_REPLY_BYTES)

    async def Cancel(
        self, request: backend_pb2.CancelRequest, context: Any
    ) -> backend_pb2.CancelResponse:
        return mapping.cancel_to_proto(
            await self.adaptor.cancel(list(request.identifiers), list(request.parcel_ids))
        )

    async def GetLogs(
        self, request: backend_pb2.GetLogsRequest, context: Any
    ) -> backend_pb2.GetLogsResponse:
        asked = min(max(0, request.max_bytes), MAX_LOG_BYTES)  # the cap, whatever the adaptor
        logs = await self.adaptor.logs(request.identifier, asked)
        return backend_pb2.GetLogsResponse(logs=mapping.logs_to_proto(logs))


def adaptor_service(adaptor: Adaptor) -> Service:
    """The adaptor as a service a `GrpcServer` serves."""
    return Service.of(
        backend_pb2.DESCRIPTOR.services_by_name["BackendAdaptorService"],
        backend_pb2_grpc.add_BackendAdaptorServiceServicer_to_server,
        AdaptorServicer(adaptor),
    )
