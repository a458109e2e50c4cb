"""The push path's client: outcomes an adaptor reports on its own, sent to the dispatcher's
`DispatcherService.ReportOutcomes`, with the dispatcher's acknowledgements back as domain types.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from dxts.core.adaptor import mapping
from dxts.core.adaptor.model import Outcome, OutcomeAck
from dxts.core.grpc import channel
from dxts.core.ids import id_to_str, new_id
from dxts.v1 import dispatcher_pb2, dispatcher_pb2_grpc


class GrpcOutcomeReporter:
    """An `OutcomeReporter` over the dispatcher at `address`; the channel opens at the first
    report and closes with `close()`."""

    def __init__(self, address: str, *, token: str | None) -> None:
        self._address = address
        self._token = token
        self._channel: grpc.aio.Channel | None = None
        self._stub: dispatcher_pb2_grpc.DispatcherServiceAsyncStub | None = None

    async def report(self, backend: str, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        if self._stub is None:
            self._channel = channel(self._address, token=self._token)
            self._stub = dispatcher_pb2_grpc.DispatcherServiceStub(self._channel)
        reply = await self._stub.ReportOutcomes(
            dispatcher_pb2.ReportOutcomesRequest(
                request_id=id_to_str(new_id()),
                backend=backend,
                outcomes=[mapping.outcome_to_proto(o) for o in outcomes],
            )
        )
        return [mapping.ack_from_proto(a) for a in reply.acks]

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None
