"""`BackendAdaptorService` over any `Adaptor`: requests to domain calls and results to replies,
nothing else. Every adaptor is served through this one servicer."""

from __future__ import annotations

from typing import Any

from dxts.backends.logic import Adaptor
from dxts.core.adaptor import mapping
from dxts.core.grpc import Service
from dxts.v1 import backend_pb2, backend_pb2_grpc


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
        return mapping.poll_to_proto(await self.adaptor.poll(list(request.identifiers)))

    async def Cancel(
        self, request: backend_pb2.CancelRequest, context: Any
    ) -> backend_pb2.CancelResponse:
        return mapping.cancel_to_proto(
            await self.adaptor.cancel(list(request.identifiers), list(request.parcel_ids))
        )

    async def GetLogs(
        self, request: backend_pb2.GetLogsRequest, context: Any
    ) -> backend_pb2.GetLogsResponse:
        logs = await self.adaptor.logs(request.identifier, max(0, request.max_bytes))
        return backend_pb2.GetLogsResponse(logs=mapping.logs_to_proto(logs))


def adaptor_service(adaptor: Adaptor) -> Service:
    """The adaptor as a service a `GrpcServer` serves."""
    return Service.of(
        backend_pb2.DESCRIPTOR.services_by_name["BackendAdaptorService"],
        backend_pb2_grpc.add_BackendAdaptorServiceServicer_to_server,
        AdaptorServicer(adaptor),
    )
