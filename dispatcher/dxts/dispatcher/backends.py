"""One configured backend as the dispatcher sees it: the adaptor's stub, and what it said.

Every call carries the configured deadline. An adaptor that cannot be reached, or does not
answer in time, raises `BackendUnreachable`: the dispatcher then leaves what it was doing to
the next round (a Reserved parcel to the recovery sweep, an Assigned one to the next poll),
which is safe because every adaptor call is idempotent.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import grpc

from dxts.core.errors import Unavailable
from dxts.dispatcher.db import IDENTIFIER_TABLES
from dxts.dispatcher.settings import BackendConfig
from dxts.v1 import backend_pb2, backend_pb2_grpc


class BackendUnreachable(Exception):
    """The adaptor did not answer (down, unreachable, or past the deadline)."""


@dataclass
class BackendState:
    """What this dispatcher knows of a backend, for DispatcherStatus and the claim budget."""

    reachable: bool = False
    report_mode: int = backend_pb2.REPORT_MODE_PULL
    capacity: int = 0
    in_flight: int = 0  # Reserved + Assigned to it: the database's count, plus what was since
    refusals: int = 0
    bad_outcomes: int = 0
    last_poll_at: datetime | None = None
    backoff_until: float = 0.0  # time.monotonic() before which claims skip this backend
    counters: dict[str, int] = field(default_factory=dict)


class BackendClient:
    def __init__(self, config: BackendConfig, channel: grpc.aio.Channel, timeout_s: float) -> None:
        if config.adaptor not in IDENTIFIER_TABLES:
            raise ValueError(
                f"backend {config.name!r}: adaptor type {config.adaptor!r} has no identifier "
                f"table (known: {', '.join(sorted(IDENTIFIER_TABLES))})"
            )
        self.config = config
        self.name = config.name
        self.adaptor = config.adaptor
        self.state = BackendState()
        self._stub = backend_pb2_grpc.BackendAdaptorServiceStub(channel)
        self._timeout_s = timeout_s

    async def _call(self, method: Any, request: Any) -> Any:
        try:
            reply = await method(request, timeout=self._timeout_s)
        except (grpc.aio.AioRpcError, Unavailable) as error:
            self.state.reachable = False
            raise BackendUnreachable(f"backend {self.name}: {error}") from error
        self.state.reachable = True
        return reply

    async def describe(self) -> backend_pb2.DescribeResponse:
        reply = await self._call(self._stub.Describe, backend_pb2.DescribeRequest())
        self.state.report_mode = reply.report_mode
        self.state.capacity = reply.capacity
        self.state.counters = dict(reply.counters)
        return reply

    async def submit(
        self, payload: backend_pb2.Payload, parcels: Sequence[backend_pb2.ParcelSubmission]
    ) -> list[backend_pb2.SubmitResult]:
        reply = await self._call(
            self._stub.Submit, backend_pb2.SubmitRequest(payload=payload, parcels=list(parcels))
        )
        return list(reply.results)

    async def poll(self, identifiers: Sequence[str]) -> backend_pb2.PollResponse:
        return await self._call(
            self._stub.Poll, backend_pb2.PollRequest(identifiers=list(identifiers))
        )

    async def cancel(
        self, identifiers: Sequence[str] = (), parcel_ids: Sequence[str] = ()
    ) -> backend_pb2.CancelResponse:
        return await self._call(
            self._stub.Cancel,
            backend_pb2.CancelRequest(identifiers=list(identifiers), parcel_ids=list(parcel_ids)),
        )

    def backing_off(self) -> bool:
        return time.monotonic() < self.state.backoff_until

    def back_off(self, seconds: float) -> None:
        self.state.backoff_until = time.monotonic() + seconds
