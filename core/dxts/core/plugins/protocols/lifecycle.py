"""What the lifecycle's hooks and actions read and ask of other components.

A plugin never receives a connection for entity tables. The lifecycle's hooks and actions run in
the definition service, yet they need execution's rows (parcels, inputs, outputs), accounting's
exact counters, and execution's bulk operations (cancel, write off, clean). Each comes through a
Protocol here: the definition service provides implementations over gRPC and registers them as
providers, and a plugin asks for one by annotating a parameter with it.

The definition service is the one process that runs these plugins, so only it provides these
Protocols: a plugin declares them optional (`execution: ExecutionView | None = None`), which keeps
the start-up check of a process that never runs it (execution checks every installed plugin)
from refusing it, and asks for the value with `needed`, which fails loudly where it is missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar
from uuid import UUID

from dxts.core.errors import Unavailable
from dxts.core.plugins import InputRecord, Transformation
from dxts.core.states import InputStatus, Kind, ParcelStatus

I, P = InputStatus, ParcelStatus  # noqa: E741 - the state tables' names
S = TypeVar("S")

# Inputs that are still work (not settled either way), and parcels that are.
LIVE_INPUTS = (I.UNASSIGNED, I.ASSIGNED, I.FAILED)
IN_FLIGHT_PARCELS = (P.UNASSIGNED, P.RESERVED, P.ASSIGNED)
LIVE_PARCELS = (*IN_FLIGHT_PARCELS, P.COMPLETING)
# Parcels whose inputs (all, or the report's successes) were processed.
SUCCEEDED_PARCELS = (P.DONE, P.PARTIALLY_DONE)


# -- records -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParcelRecord:
    id: UUID
    kind: Kind
    status: ParcelStatus
    backend: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OutputRecord:
    """A file a parcel produced (a ParcelOutputs row) with its declared output."""

    transformation_output_id: UUID
    name: str
    intermediate: bool
    parcel_id: UUID
    lfn: str
    size: int | None = None


class CleanMode(StrEnum):
    """What CleanTransformation deletes: archiving keeps what the catalogue points at."""

    ARCHIVE = "archive"
    CLEAN = "clean"


@dataclass(frozen=True)
class CleanStep:
    rows_deleted: int
    complete: bool


# -- protocols -----------------------------------------------------------------------------------


class Counts(Protocol):
    """Exact per-status counts (accounting's counters); a transformation absent counts zero."""

    async def inputs(self, ids: Sequence[UUID]) -> dict[UUID, dict[InputStatus, int]]: ...

    async def parcels(self, ids: Sequence[UUID]) -> dict[UUID, dict[ParcelStatus, int]]: ...


class ExecutionView(Protocol):
    """Execution's rows of one transformation, streamed (a transformation may hold millions)."""

    def parcels(
        self, transformation_id: UUID, statuses: Collection[ParcelStatus] = ()
    ) -> AsyncIterator[ParcelRecord]: ...

    def inputs(
        self, transformation_id: UUID, statuses: Collection[InputStatus] = ()
    ) -> AsyncIterator[InputRecord]: ...

    def outputs(self, transformation_id: UUID) -> AsyncIterator[OutputRecord]:
        """Every file the transformation's parcels produced."""
        ...

    def outputs_of(self, transformation_output_id: UUID) -> AsyncIterator[OutputRecord]:
        """Every file produced under one declared output (an internal edge's producer side)."""
        ...

    def successes(self, transformation_id: UUID) -> AsyncIterator[tuple[UUID, UUID]]:
        """(parcel, input) for every input a parcel processed successfully: every input of a
        Done parcel, the inputs a PartiallyDone parcel's status report calls SUCCESS."""
        ...


class Siblings(Protocol):
    """The other members of a transformation's workgraph (definition's own rows)."""

    async def members(self, workgraph_id: UUID) -> dict[str, Transformation]:
        """Every member by its name in the document."""
        ...


@dataclass(frozen=True)
class Flushed:
    """What one flush did (ExecutionService.Flush's answer). A packer that failed is not an
    error of the call: the flush ran, and `failure` says why the packer stopped, in its words,
    with its class (PluginFailed, InvalidArgument, ...); what it decided before stays written."""

    offered: int = 0
    parcels: int = 0
    assigned: int = 0
    problematic: int = 0
    delayed: int = 0
    failure: str = ""
    failure_class: str = ""


class ExecutionControl(Protocol):
    """Execution's operations the lifecycle asks for; each is idempotent by `request_id`."""

    async def flush(self, transformation_id: UUID, *, request_id: str) -> Flushed:
        """One packer invocation with flush=True, and what it did."""
        ...

    async def cancel_in_flight(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        """Cancel the Unassigned, Reserved and Assigned parcels."""
        ...

    async def write_off_waiting(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        """Unassigned, Failed and Problematic inputs → NotProcessed."""
        ...

    async def clean_transformation(
        self, transformation_id: UUID, mode: CleanMode, *, request_id: str
    ) -> CleanStep:
        """Delete one batch of the bulk rows; `complete` once nothing is left."""
        ...


@dataclass(frozen=True)
class FinalParcel:
    """Where a parcel the lifecycle asked for stands: its status and, once it failed, why (in
    the backend's words)."""

    id: UUID
    status: ParcelStatus
    message: str = ""


class FinalParcels(Protocol):
    """One last parcel a transformation's Finalizing list asks for (MergeHistograms): a parcel
    of the transformation's owner running `process` over `parameters`, belonging to no
    transformation (it is not counted, and carries no inputs). Idempotent by `request_id`: the
    same request answers the parcel it created."""

    async def create_final_parcel(
        self,
        transformation_id: UUID,
        *,
        process: dict[str, Any],
        parameters: dict[str, Any],
        annotations: dict[str, Any],
        request_id: str,
    ) -> UUID: ...

    async def final_parcel(self, parcel_id: UUID) -> FinalParcel: ...


def needed(service: S | None, what: str) -> S:
    """The injected service, or Unavailable naming it when this process does not provide it."""
    if service is None:
        raise Unavailable(
            f"{what} is not provided here: the lifecycle's hooks and actions run in the "
            "definition service"
        )
    return service
