"""What the definition service asks of the execution service, as a Protocol and over gRPC.

Execution owns inputs and parcels, so the operator commands that touch them are forwarded:
a flush, the input/parcel half of a halt, and the user parcel of a submitted job. Domain code
depends only on `ExecutionClient`; `GrpcExecutionClient` is the production one, built per call
with the caller's bearer token so that execution applies its own rights to the same caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from dxts.core.errors import Unavailable
from dxts.core.grpc.convert import enum_to_proto, json_text
from dxts.core.ids import hash_to_str, id_from_str, id_to_str
from dxts.core.states import InputStatus, ParcelStatus
from dxts.v1 import execution_pb2, execution_pb2_grpc

# What a halt cancels and writes off (STATE-MACHINES.md, "Closing").
IN_FLIGHT_PARCELS = (ParcelStatus.UNASSIGNED, ParcelStatus.RESERVED, ParcelStatus.ASSIGNED)
WAITING_INPUTS = (InputStatus.UNASSIGNED, InputStatus.FAILED, InputStatus.PROBLEMATIC)


@dataclass(frozen=True)
class UserParcel:
    """A user job's parcel, for execution to create (its process already stored)."""

    vo: str
    sub: str
    process_id: bytes
    requirements_id: bytes | None
    parameters: Any
    annotations: dict[str, Any] = field(default_factory=dict)


class ExecutionClient(Protocol):
    async def flush(self, transformation_id: bytes, *, request_id: str) -> None:
        """One packer invocation with flush=True."""

    async def cancel_in_flight(
        self, transformation_id: bytes, *, request_id: str, reason: str
    ) -> None:
        """Cancel the transformation's Unassigned, Reserved and Assigned parcels."""

    async def write_off_waiting(
        self, transformation_id: bytes, *, request_id: str, reason: str
    ) -> None:
        """Write off its Unassigned, Failed and Problematic inputs (NotProcessed)."""

    async def create_user_parcel(self, parcel: UserParcel, *, request_id: str) -> bytes:
        """Create the user parcel (Unassigned); returns its ParcelID."""


ExecutionFactory = Callable[[str | None], ExecutionClient]
"""Builds the client for one call from the caller's bearer token (None: no token)."""


class GrpcExecutionClient:
    """ExecutionClient over `ExecutionService` on a `dxts.core.grpc.channel` (domain errors)."""

    def __init__(self, channel: grpc.aio.Channel, token: str | None) -> None:
        self._stub = execution_pb2_grpc.ExecutionServiceStub(channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None

    async def flush(self, transformation_id: bytes, *, request_id: str) -> None:
        await self._stub.Flush(
            execution_pb2.FlushRequest(
                request_id=request_id, transformation_id=id_to_str(transformation_id)
            ),
            metadata=self._metadata,
        )

    async def cancel_in_flight(
        self, transformation_id: bytes, *, request_id: str, reason: str
    ) -> None:
        selection = execution_pb2.ParcelSelection(
            statuses=[enum_to_proto(s) for s in IN_FLIGHT_PARCELS]  # type: ignore[misc]
        )
        await self._stub.CancelParcels(
            execution_pb2.CancelParcelsRequest(
                request_id=request_id,
                transformation_id=id_to_str(transformation_id),
                selection=selection,
                reason=reason,
            ),
            metadata=self._metadata,
        )

    async def write_off_waiting(
        self, transformation_id: bytes, *, request_id: str, reason: str
    ) -> None:
        selection = execution_pb2.InputSelection(
            statuses=[enum_to_proto(s) for s in WAITING_INPUTS]  # type: ignore[misc]
        )
        await self._stub.WriteOffInputs(
            execution_pb2.WriteOffInputsRequest(
                request_id=request_id,
                transformation_id=id_to_str(transformation_id),
                selection=selection,
                reason=reason,
            ),
            metadata=self._metadata,
        )

    async def create_user_parcel(self, parcel: UserParcel, *, request_id: str) -> bytes:
        reply = await self._stub.CreateUserParcel(
            execution_pb2.CreateUserParcelRequest(
                request_id=request_id,
                vo=parcel.vo,
                owner_sub=parcel.sub,
                process_id=hash_to_str(parcel.process_id),
                requirements_id=hash_to_str(parcel.requirements_id)
                if parcel.requirements_id
                else "",
                parameters_json=json_text(parcel.parameters),
                annotations_json=json_text(parcel.annotations or None),
            ),
            metadata=self._metadata,
        )
        return id_from_str(reply.parcel_id, field="parcel_id")


class NoExecutionClient:
    """Stands in when no execution address is configured: every forward is UNAVAILABLE."""

    def _refuse(self) -> Unavailable:
        return Unavailable(
            "the execution service is not configured (DXTS_EXECUTION_ADDRESS): flushes, halts "
            "and user jobs need it"
        )

    async def flush(self, transformation_id: bytes, *, request_id: str) -> None:
        raise self._refuse()

    async def cancel_in_flight(
        self, transformation_id: bytes, *, request_id: str, reason: str
    ) -> None:
        raise self._refuse()

    async def write_off_waiting(
        self, transformation_id: bytes, *, request_id: str, reason: str
    ) -> None:
        raise self._refuse()

    async def create_user_parcel(self, parcel: UserParcel, *, request_id: str) -> bytes:
        raise self._refuse()
