"""The transformations execution works on, as the definition side describes them.

Transformations belong to the definition side and reads across sides go through the owner's
contract (docs/architecture.md), so the sweeps take their work list from an `ActiveTransformations`:

* `active()` — every Active transformation with what the runners need (feeder, packer, their
  arguments, FeederEnabled (the operator's switch), the scouting and halted flags, ProcessID, the
  requirements template, the declared outputs);
* `listed(ids)` — the same records for these transformations whatever their status (the same
  listing, asked by id): recording needs the declared outputs of a transformation whose parcels
  complete after it has left Active (Paused, Finalizing, ...);
* `describe(id, token=...)` — one transformation as the caller sees it (its VO, owner and
  status), with the caller's own token, so that definition decides what the caller may see
  (NotFound otherwise), as for accounting's workgraph summaries.

The production implementation asks DefinitionService (`dxts.execution.edge.definition_client`).
`ActiveSnapshot` keeps the last list for the lookups plugins' readers make between two sweeps
(which transformation produces an output), and is the one way declared outputs reach
execution (`declared_outputs`), for the sweeps and recording alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from dxts.core.plugins import Phase, Transformation
from dxts.core.states import Kind, TransformationStatus


@dataclass(frozen=True)
class Output:
    """A declared output (TransformationOutputs row)."""

    output_id: bytes
    name: str
    intermediate: bool = False


@dataclass(frozen=True)
class ActiveTransformation:
    """One transformation as the execution sweeps see it."""

    id: bytes
    type: str
    kind: Kind
    packer: str
    status: TransformationStatus = TransformationStatus.ACTIVE
    vo: str = ""
    owner_sub: str = ""
    workgraph_id: bytes | None = None
    feeder: str | None = None
    feeder_args: dict[str, Any] = field(default_factory=dict)
    feeder_enabled: bool = True  # the operator's switch (definition's)
    feeder_exhausted: bool = False  # it said NoMoreInputs (execution's own row), when read
    packer_args: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)
    hooks: dict[str, Any] = field(default_factory=dict)  # the Hooks column: name → binding
    scouting: bool = False
    halted: bool = False
    process_id: bytes | None = None
    requirements_template: dict[str, Any] | None = None
    outputs: tuple[Output, ...] = ()

    @property
    def phase(self) -> Phase:
        return Phase.SCOUTING if self.scouting else Phase.ACTIVE

    @property
    def feeds(self) -> bool:
        """Its feeder runs: Active, a feeder bound and enabled, the workgraph not halted (and
        not exhausted: the feeder runner reads that itself, from execution's row)."""
        return (
            self.status is TransformationStatus.ACTIVE
            and self.feeder is not None
            and self.feeder_enabled
            and not self.halted
        )

    @property
    def packs(self) -> bool:
        """Its packer runs: Active (not Paused) and the workgraph not halted."""
        return self.status is TransformationStatus.ACTIVE and not self.halted

    @property
    def feeder_active(self) -> bool:
        """What the packer is told: more input may come."""
        return (
            self.feeder is not None
            and self.feeder_enabled
            and not self.feeder_exhausted
            and not self.halted
        )

    def view(self) -> Transformation:
        """The read-only view a plugin receives."""
        return Transformation(
            id=UUID(bytes=self.id),
            type=self.type,
            kind=self.kind,
            status=self.status,
            feeder=self.feeder,
            feeder_args=dict(self.feeder_args),
            feeder_enabled=self.feeder_enabled and not self.feeder_exhausted,
            packer=self.packer,
            packer_args=dict(self.packer_args),
            workgraph_id=UUID(bytes=self.workgraph_id) if self.workgraph_id else None,
            annotations=dict(self.annotations),
        )


@dataclass(frozen=True)
class Description:
    """One transformation as a caller sees it (`describe`)."""

    id: bytes
    vo: str
    owner_sub: str
    status: TransformationStatus


class ActiveTransformations(Protocol):
    async def active(self) -> list[ActiveTransformation]:
        """Every Active transformation, fresh from the definition side."""
        ...

    async def listed(self, transformation_ids: Collection[bytes]) -> list[ActiveTransformation]:
        """These transformations whatever their status; one the definition side does not know
        is left out."""
        ...

    async def describe(self, transformation_id: bytes, *, token: str | None) -> Description:
        """The transformation as the caller whose `token` is forwarded sees it; NotFound when
        it does not exist or the caller may not see it."""
        ...

    async def describe_many(
        self, transformation_ids: Collection[bytes], *, token: str | None
    ) -> list[Description]:
        """`describe` of each, in as few calls as the definition side allows (a grouping over
        500 members must not ask 500 times); NotFound names the first the caller may not see."""
        ...


class ActiveSnapshot:
    """The last `active()` list, refreshed when older than `max_age_s`, indexed for lookups.

    The sweeps refresh it every round (`refresh`); the plugins' readers look up in it which
    transformation produces an output, between rounds. The declared outputs of every
    transformation it has seen are kept (they never change once a transformation exists), so
    recording asks the definition side only about a transformation it has never listed.
    """

    def __init__(self, source: ActiveTransformations, *, max_age_s: float = 5.0) -> None:
        self.source = source
        self.max_age_s = max_age_s
        self._records: dict[bytes, ActiveTransformation] = {}
        self._producers: dict[bytes, bytes] = {}
        self._declared: dict[bytes, dict[str, bytes]] = {}
        self._taken = -float("inf")
        self._lock = asyncio.Lock()

    async def refresh(self) -> list[ActiveTransformation]:
        async with self._lock:
            records = await self.source.active()
            self._records = {record.id: record for record in records}
            self._producers = {o.output_id: r.id for r in records for o in r.outputs}
            self._keep_declared(records)
            self._taken = time.monotonic()
            return records

    def _keep_declared(self, records: Collection[ActiveTransformation]) -> None:
        for record in records:
            self._declared[record.id] = {o.name: o.output_id for o in record.outputs}

    async def declared_outputs(
        self, transformation_ids: Collection[bytes]
    ) -> dict[bytes, dict[str, bytes]]:
        """Output name → TransformationOutputID, for each of these transformations the
        definition side knows (one it does not know is left out)."""
        unseen = {tid for tid in transformation_ids if tid not in self._declared}
        if unseen:
            self._keep_declared(await self.source.listed(unseen))
        return {tid: self._declared[tid] for tid in transformation_ids if tid in self._declared}

    async def _current(self) -> None:
        if time.monotonic() - self._taken > self.max_age_s:
            await self.refresh()

    async def get(self, transformation_id: bytes) -> ActiveTransformation | None:
        await self._current()
        return self._records.get(transformation_id)

    async def producer_of(self, output_id: bytes) -> ActiveTransformation | None:
        """The Active transformation declaring `output_id`; None if none is Active."""
        await self._current()
        producer = self._producers.get(output_id)
        return self._records.get(producer) if producer is not None else None
