"""The adaptors' gRPC clients (`BackendAdaptorService`): each backend's `BackendAdaptor` calls,
in domain terms, every call with the configured deadline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grpc

from dxts.core.adaptor import mapping
from dxts.core.adaptor.model import (
    CancelResult,
    Description,
    JobLogs,
    Payload,
    PollResult,
    Submission,
    SubmitResult,
)
from dxts.core.errors import Unavailable
from dxts.core.kernel.authorisation import rpc
from dxts.dispatcher.logic.backends import BackendUnreachable
from dxts.v1 import backend_pb2, backend_pb2_grpc

Adaptor = backend_pb2_grpc.BackendAdaptorServiceServicer


class GrpcAdaptorCalls:
    def __init__(self, name: str, channel: grpc.aio.Channel, timeout_s: float) -> None:
        self._name = name
        self._stub = backend_pb2_grpc.BackendAdaptorServiceStub(channel)
        self._timeout_s = timeout_s

    async def _call(self, declared: Callable[..., object], request: Any) -> Any:
        """Call the RPC `declared` names (a method of the contract's servicer)."""
        name = rpc(declared).name
        try:
            return await getattr(self._stub, name)(request, timeout=self._timeout_s)
        except (grpc.aio.AioRpcError, Unavailable) as error:
            raise BackendUnreachable(f"backend {self._name}: {error}", rpc=name) from error

    async def describe(self) -> Description:
        reply = await self._call(Adaptor.Describe, backend_pb2.DescribeRequest())
        return mapping.description_from_proto(reply)

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        reply = await self._call(Adaptor.Submit, mapping.submit_request(payload, parcels))
        return [mapping.submit_result_from_proto(r) for r in reply.results]

    async def poll(self, identifiers: Sequence[str]) -> PollResult:
        reply = await self._call(
            Adaptor.Poll, backend_pb2.PollRequest(identifiers=list(identifiers))
        )
        return mapping.poll_from_proto(reply)

    async def cancel(self, identifiers: Sequence[str], parcel_ids: Sequence[str]) -> CancelResult:
        reply = await self._call(
            Adaptor.Cancel,
            backend_pb2.CancelRequest(identifiers=list(identifiers), parcel_ids=list(parcel_ids)),
        )
        return mapping.cancel_from_proto(reply)

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs:
        reply = await self._call(
            Adaptor.GetLogs,
            backend_pb2.GetLogsRequest(identifier=identifier, max_bytes=max_bytes),
        )
        return mapping.logs_from_proto(reply.logs)
