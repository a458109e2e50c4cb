"""A stand-in for the dispatcher's `ReportOutcomes`, for checking an adaptor that reports in
push mode: it records every outcome pushed to it, and answers the first push of each outcome
UNKNOWN_PARCEL — as the dispatcher does while it has not yet recorded the identifier — so that
the adaptor must push it again; later pushes are RECORDED. It checks no token: it is a test
double, listening where the adaptor under check was told the dispatcher is.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from dxts.v1 import common_pb2, dispatcher_pb2, dispatcher_pb2_grpc

UNKNOWN_PARCEL = common_pb2.OUTCOME_DISPOSITION_UNKNOWN_PARCEL
RECORDED = common_pb2.OUTCOME_DISPOSITION_RECORDED
STANDS_IN_FOR = "a stand-in for ReportOutcomes only (dxts adaptor check)"


class DispatcherStandIn(dispatcher_pb2_grpc.DispatcherServiceServicer):
    """The outcomes pushed to it, by identifier, with the backend each push named."""

    def __init__(self) -> None:
        self.address = ""
        self.pushes: dict[str, list[tuple[str, common_pb2.Outcome]]] = {}
        self._pushed = asyncio.Condition()

    async def ReportOutcomes(
        self, request: dispatcher_pb2.ReportOutcomesRequest, context: Any
    ) -> dispatcher_pb2.ReportOutcomesResponse:
        acks = []
        async with self._pushed:
            for outcome in request.outcomes:
                seen = self.pushes.setdefault(outcome.identifier, [])
                seen.append((request.backend, outcome))
                acks.append(
                    common_pb2.OutcomeAck(
                        parcel_id=outcome.parcel_id,
                        backend=outcome.backend or request.backend,
                        identifier=outcome.identifier,
                        disposition=UNKNOWN_PARCEL if len(seen) == 1 else RECORDED,
                    )
                )
            self._pushed.notify_all()
        return dispatcher_pb2.ReportOutcomesResponse(acks=acks)

    async def DispatcherStatus(
        self, request: dispatcher_pb2.DispatcherStatusRequest, context: Any
    ) -> dispatcher_pb2.DispatcherStatusResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, STANDS_IN_FOR)
        raise AssertionError("abort raises")

    async def GetParcelLogs(
        self, request: dispatcher_pb2.GetParcelLogsRequest, context: Any
    ) -> dispatcher_pb2.GetParcelLogsResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, STANDS_IN_FOR)
        raise AssertionError("abort raises")

    def reports_of(self, identifier: str) -> list[tuple[str, common_pb2.Outcome]]:
        """Every push of the identifier's outcome so far: (backend, outcome)."""
        return list(self.pushes.get(identifier, []))

    async def pushed(
        self, identifier: str, times: int, timeout_s: float
    ) -> list[tuple[str, common_pb2.Outcome]] | None:
        """The identifier's pushes once there were `times` of them (waited for), or None when
        there were fewer within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        async with self._pushed:
            while len(self.pushes.get(identifier, [])) < times:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._pushed.wait(), left)
            return list(self.pushes[identifier])


@contextlib.asynccontextmanager
async def serving_standin(listen: str) -> AsyncIterator[DispatcherStandIn]:
    """A `DispatcherStandIn` served at `listen` (host:port; port 0: a free one, in `address`)
    until the block ends."""
    standin = DispatcherStandIn()
    server = grpc.aio.server()
    dispatcher_pb2_grpc.add_DispatcherServiceServicer_to_server(standin, server)
    port = server.add_insecure_port(listen)
    host = listen.rpartition(":")[0]
    standin.address = f"{host}:{port}"
    await server.start()
    try:
        yield standin
    finally:
        await server.stop(grace=0)
