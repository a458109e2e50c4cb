"""What built-in plugins read from execution's rows, as read-only Protocols execution provides.

The built-ins live in core, because definition validates their arguments and may not import
execution, yet four of them read execution's tables: the Edge feeder the producer's
ParcelOutputs, the Join packer a driving input's partner, the Seeds feeder its work in flight,
and a Data transformation's packer what became of its files in the steps it waits on (`after`).
A plugin never receives a connection for entity tables, so each reads through one of these
Protocols: execution implements them and registers the implementations as providers
(`Providers.add(ParcelOutputReader, ...)`), and a plugin asks for one by annotating a
parameter with the Protocol. Tests give plain doubles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol
from uuid import UUID

from dxts.core.plugins import InputOverview
from dxts.core.states import InputStatus


@dataclass(frozen=True)
class ProducedFile:
    """One ParcelOutputs row: a file a producer's parcel made under one declared output."""

    output_id: UUID
    lfn: str
    lfn_size: int | None


class ParcelOutputReader(Protocol):
    """The producer side of an internal edge (the Edge feeder)."""

    async def settled_through(self, transformation_output_id: UUID) -> UUID | None:
        """The commit-safe watermark: the largest OutputID under the output such that every row
        at or below it is committed and none will ever be added there (None: no row yet)."""
        ...

    async def outputs(
        self,
        transformation_output_id: UUID,
        *,
        after: UUID | None,
        through: UUID,
        limit: int,
    ) -> list[ProducedFile]:
        """Up to `limit` rows under the output with `after` < OutputID <= `through` (None: from
        the first), in OutputID order (a primary-key range scan)."""
        ...

    async def producer_drained(self, transformation_output_id: UUID) -> bool:
        """Whether the transformation producing the output is drained: its feeder disabled and
        none of its inputs or parcels in a non-terminal state (exact counters). Once it is,
        every row it will ever write under the output is committed."""
        ...


class InputOverviewReader(Protocol):
    """A transformation's exact input counts (the Transformation counter)."""

    async def input_overview(self, transformation_id: UUID) -> InputOverview: ...


class PartnerState(StrEnum):
    """Where a driving input's partner stands, for the built-in Join packer."""

    READY = "ready"  # produced: join it
    WAITING = "waiting"  # not yet (or quarantined): delay the driving input
    NEVER = "never"  # its input ended NotProcessed: the driving input is Problematic


@dataclass(frozen=True)
class Partner:
    state: PartnerState
    files: tuple[ProducedFile, ...] = ()
    reason: str = ""


class PartnerLookup(Protocol):
    """The joined edge of a step with two inputs sourced from other steps (the Join packer)."""

    async def partners(
        self, lfns: Sequence[str], *, driving_output: UUID, partner_output: UUID
    ) -> dict[str, Partner]:
        """For each driving LFN (a file produced under `driving_output`), its partner under
        `partner_output`, looked up through the schema: the producing parcel, that parcel's
        inputs (the source files), the partner producer's input for the same source file and
        the files its last parcel produced under `partner_output`. Every LFN gets an answer."""
        ...


class ConsumerLookup(Protocol):
    """What became of files in the transformations a member waits on (its `after`):
    a lookup of an LFN in a consumer's Inputs, by their (TransformationID, LFN) index, which
    exists for it."""

    async def consumed(
        self, lfns: Sequence[str], *, consumers: Sequence[UUID]
    ) -> dict[UUID, dict[str, tuple[InputStatus, ...]]]:
        """For each consumer, the statuses of its Inputs rows for each of `lfns` (one read for
        the whole chunk); an LFN the consumer has not been fed is absent from its map."""
        ...
