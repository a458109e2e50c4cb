"""What the definition service asks of the execution service (a Protocol on domain types).

Execution owns inputs and parcels, so the operator commands that touch them are forwarded:
a flush, the input/parcel half of a halt, and the user parcel of a submitted job. The logic
depends only on `ExecutionClient`; the gRPC one (`edge.execution_client`) is built per call
with the caller's bearer token so that execution applies its own rights to the same caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


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
