"""One configured backend as the dispatcher sees it: the calls to its adaptor, and what it said.

The calls (`dxts.core.adaptor.protocol.BackendAdaptor`: Describe, Submit, Poll, Cancel in
domain terms, whose rules the dispatcher relies on) are the edge's, over gRPC; every one
carries the configured deadline. An adaptor that cannot be reached, or does not answer in time,
raises `BackendUnreachable`: the dispatcher then leaves what it was doing to the next round (a
Reserved parcel to the recovery sweep, an Assigned one to the next poll), which is safe because
every adaptor call is idempotent.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from dxts.core.adaptor.model import (
    CancelResult,
    Description,
    JobLogs,
    Payload,
    PollResult,
    ReportMode,
    Submission,
    SubmitResult,
)
from dxts.core.adaptor.protocol import BackendAdaptor
from dxts.core.db import Database, Isolation
from dxts.dispatcher.settings import BackendConfig
from dxts.dispatcher.store.forwarding import BackendLoad, backend_loads

T = TypeVar("T")


class BackendUnreachable(Exception):
    """The adaptor did not answer (down, unreachable, or past the deadline) the call of `rpc`
    (the contract's method name, as the unreachable metric labels it)."""

    def __init__(self, message: str, *, rpc: str) -> None:
        super().__init__(message)
        self.rpc = rpc


@dataclass
class BackendState:
    """What this dispatcher knows of a backend, for DispatcherStatus and the claim budget."""

    reachable: bool = False
    report_mode: ReportMode = ReportMode.PULL
    capacity: int = 0
    in_flight: int = 0  # Reserved + Assigned to it: the database's count, plus what was since
    refusals: int = 0
    bad_outcomes: int = 0
    last_poll_at: datetime | None = None
    backoff_until: float = 0.0  # time.monotonic() before which claims skip this backend
    counters: dict[str, int] = field(default_factory=dict)


class Backend:
    def __init__(self, config: BackendConfig, calls: BackendAdaptor) -> None:
        self.config = config
        self.name = config.name
        self.adaptor = config.adaptor
        self.state = BackendState()
        self._calls = calls

    async def _call(self, call: Awaitable[T]) -> T:
        """The answer of one adaptor call, noting whether the adaptor answered at all."""
        try:
            answer = await call
        except BackendUnreachable:
            self.state.reachable = False
            raise
        self.state.reachable = True
        return answer

    async def describe(self) -> Description:
        described = await self._call(self._calls.describe())
        self.state.report_mode = described.report_mode
        self.state.capacity = described.capacity
        self.state.counters = dict(described.counters)
        return described

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        return await self._call(self._calls.submit(payload, parcels))

    async def poll(self, identifiers: Sequence[str]) -> PollResult:
        return await self._call(self._calls.poll(identifiers))

    async def cancel(
        self, identifiers: Sequence[str] = (), parcel_ids: Sequence[str] = ()
    ) -> CancelResult:
        return await self._call(self._calls.cancel(identifiers, parcel_ids))

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs:
        return await self._call(self._calls.logs(identifier, max_bytes))

    def backing_off(self) -> bool:
        return time.monotonic() < self.state.backoff_until

    def back_off(self, seconds: float) -> None:
        self.state.backoff_until = time.monotonic() + seconds


async def read_loads(
    database: Database, names: Sequence[str]
) -> tuple[dict[str, BackendLoad], datetime]:
    """Per backend: its Reserved and Assigned parcels and its oldest reservation, with the
    database clock to age that against."""
    return await database.run(
        lambda conn: backend_loads(conn, sorted(names)), isolation=Isolation.READ_COMMITTED
    )
