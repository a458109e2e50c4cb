"""The accounting service over gRPC, as the lifecycle engine uses it: the exact counters.

* `GrpcCounts` — `Counts` over `AccountingService.GetCounts` (up to 1000 ids per call);
* `NoCounts` — stands in when no address is configured: every call is UNAVAILABLE, which the
  engine reports and retries like any unavailable peer.

The Protocols are core's (`dxts.core.plugins.protocols.lifecycle`: the built-ins live in core
and declare what they need by annotation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import grpc

from dxts.core.errors import Unavailable
from dxts.core.grpc.convert import enum_from_proto
from dxts.core.states import InputStatus, ParcelStatus
from dxts.v1 import accounting_pb2, accounting_pb2_grpc, common_pb2

COUNTS_PER_CALL = 1000  # GetCounts' limit


def _status_counts(counts: Any, enum: type[Any]) -> dict[Any, int]:
    found = {}
    for i, item in enumerate(counts.counts):
        which = item.WhichOneof("status")
        found[enum_from_proto(enum, getattr(item, which), field=f"counts[{i}]")] = item.count
    return found


class GrpcCounts:
    """`Counts` over AccountingService (a `dxts.core.grpc.channel` carrying the service token)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = accounting_pb2_grpc.AccountingServiceStub(channel)

    async def _counts(self, ids: Sequence[UUID], entity: int, enum: type[Any]) -> dict[UUID, Any]:
        wanted = list(dict.fromkeys(ids))
        found: dict[UUID, Any] = {}
        for start in range(0, len(wanted), COUNTS_PER_CALL):
            chunk = wanted[start : start + COUNTS_PER_CALL]
            reply = await self._stub.GetCounts(
                accounting_pb2.GetCountsRequest(
                    transformation_ids=[str(t) for t in chunk],
                    entity=entity,  # type: ignore[arg-type]
                )
            )
            for counts in reply.counts:
                found[UUID(counts.transformation_id)] = _status_counts(counts, enum)
        return found

    async def inputs(self, ids: Sequence[UUID]) -> dict[UUID, dict[InputStatus, int]]:
        return await self._counts(ids, common_pb2.ENTITY_INPUT, InputStatus)

    async def parcels(self, ids: Sequence[UUID]) -> dict[UUID, dict[ParcelStatus, int]]:
        return await self._counts(ids, common_pb2.ENTITY_PARCEL, ParcelStatus)


class NoCounts:
    async def inputs(self, ids: Sequence[UUID]) -> dict[UUID, dict[InputStatus, int]]:
        raise Unavailable("exact counts need the accounting service: set DXTS_ACCOUNTING_ADDRESS")

    async def parcels(self, ids: Sequence[UUID]) -> dict[UUID, dict[ParcelStatus, int]]:
        raise Unavailable("exact counts need the accounting service: set DXTS_ACCOUNTING_ADDRESS")
