"""What the built-in hooks and actions read and ask of other components, and the one threshold.

A plugin never receives a connection for entity tables (DX-ADR-006). The lifecycle built-ins
run in the definition service, yet they need execution's rows (parcels, inputs, outputs),
accounting's exact counters, and execution's bulk operations (cancel, write off, clean). Each
comes through a Protocol here: the definition service provides implementations over gRPC
(`dxts.definition.edge`; the tests have in-memory doubles) and
registers them as providers, and a plugin asks for one by annotating a parameter with it.

The definition service is the one process that runs these plugins, so only it provides these
Protocols: a plugin declares them optional (`execution: ExecutionView | None = None`), which keeps
the start-up check of a process that never runs it (execution checks every installed plugin)
from refusing it, and asks for the value with `needed`, which fails loudly where it is missing.
The definition service checks at its own start-up that it provides them
(`dxts.definition.logic.lifecycle.plugin_check`).

The success threshold. ScoutingToApproving accepts a failing scout at once so that
CheckSuccessRate fails it, which holds only if both judge the same threshold (DX-ADR-006): one
configuration value, `SuccessRateSettings`, read by both, which either may override through the
same two arguments. The rate is by input fate: Problematic over settled (Processed + Problematic),
so a failure HandleFailedInput retries into a success does not count, an input still in flight
counts neither way, a split parent is replaced by its children, and a written-off input was a
person's decision rather than a result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar
from uuid import UUID

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.errors import Unavailable
from dxts.core.plugins import InputRecord, PluginArgs, Transformation
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


class ExecutionControl(Protocol):
    """Execution's operations the lifecycle asks for; each is idempotent by `request_id`."""

    async def flush(self, transformation_id: UUID, *, request_id: str) -> None: ...

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


def needed(service: S | None, what: str) -> S:
    """The injected service, or Unavailable naming it when this process does not provide it."""
    if service is None:
        raise Unavailable(
            f"{what} is not provided here: the lifecycle's hooks and actions run in the "
            "definition service"
        )
    return service


# -- the success threshold ----------------------------------------------------------------------


class SuccessRateSettings(BaseSettings):
    """The installation's threshold (`DXTS_SUCCESS_RATE_MINIMUM`, `DXTS_SUCCESS_RATE_SAMPLE`)."""

    model_config = SettingsConfigDict(env_prefix="DXTS_SUCCESS_RATE_", extra="ignore")

    minimum: float = Field(0.9, ge=0, le=1, description="lowest acceptable success rate")
    sample: int = Field(20, ge=1, description="settled inputs before the rate is judged")


class ThresholdArgs(PluginArgs):
    """Per-workgraph overrides of the threshold; a workgraph overriding one of ScoutingToApproving
    and CheckSuccessRate should give the other the same values."""

    min_success_rate: float | None = Field(None, ge=0, le=1)
    min_sample: int | None = Field(None, ge=1)

    def threshold(self, settings: SuccessRateSettings) -> Threshold:
        return Threshold(
            settings.minimum if self.min_success_rate is None else self.min_success_rate,
            settings.sample if self.min_sample is None else self.min_sample,
        )


@dataclass(frozen=True)
class Threshold:
    min_success_rate: float
    min_sample: int


@dataclass(frozen=True)
class Fates:
    """Inputs by fate, summed over one or more transformations."""

    processed: int = 0
    problematic: int = 0
    live: int = 0

    @property
    def settled(self) -> int:
        return self.processed + self.problematic

    @property
    def success_rate(self) -> float | None:
        return self.processed / self.settled if self.settled else None

    def judged(self, threshold: Threshold) -> bool:
        return self.settled >= threshold.min_sample

    def failing(self, threshold: Threshold) -> bool:
        """The sample is large enough and its success rate is below the minimum."""
        rate = self.success_rate
        return self.judged(threshold) and rate is not None and rate < threshold.min_success_rate

    def describe(self) -> str:
        rate = self.success_rate
        shown = "no" if rate is None else f"{rate:.1%} of"
        return f"{shown} {self.settled} settled inputs succeeded ({self.problematic} Problematic)"


def fates(overviews: Iterable[Mapping[InputStatus, int]]) -> Fates:
    processed = problematic = live = 0
    for overview in overviews:
        processed += overview.get(I.PROCESSED, 0)
        problematic += overview.get(I.PROBLEMATIC, 0)
        live += sum(overview.get(status, 0) for status in LIVE_INPUTS)
    return Fates(processed, problematic, live)


def listed(items: Sequence[str], shown: int = 5) -> str:
    """The first few of `items` for a message, saying how many more there are."""
    text = "; ".join(items[:shown])
    return text + (f" ... and {len(items) - shown} more" if len(items) > shown else "")
