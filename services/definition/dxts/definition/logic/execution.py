"""What the definition service asks of the execution service (a Protocol on domain types).

Execution owns inputs, parcels and the feeders' own rows, so the operator commands that touch
them are forwarded: a flush, the input/parcel half of a halt, the user parcel of a submitted
job, and the reset of an exhausted feeder an operator or a hook enables again. The logic
depends only on `ExecutionClient`; the gRPC one (`edge.execution_client`) is built per call
with the caller's bearer token so that execution applies its own rights to the same caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dxts.core.plugins.protocols.lifecycle import ExecutionControl, Flushed


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
    async def flush(self, transformation_id: bytes, *, request_id: str) -> Flushed:
        """One packer invocation with flush=True, and what it did (its failure included)."""

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

    async def reset_feeders(
        self, transformation_ids: Sequence[bytes], *, clear_bookmarks: bool, request_id: str
    ) -> None:
        """Let these feeders run again although they said NoMoreInputs, from the beginning
        with `clear_bookmarks`."""


class FeederResets(Protocol):
    async def reset_feeders(
        self, transformation_ids: Sequence[bytes], *, clear_bookmarks: bool, request_id: str
    ) -> None:
        """As `ExecutionClient.reset_feeders` (the lifecycle's, with the service's token)."""


class LifecycleControl(ExecutionControl, FeederResets, Protocol):
    """What the lifecycle engine asks of execution: what its plugins may ask, and the reset of
    the feeders a hook enables again."""


ExecutionFactory = Callable[[str | None], ExecutionClient]
