"""In-memory doubles of the lifecycle engine's peers, for this package's tests and the
end-to-end scenarios: set what they answer, read what they were asked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from dxts.core.plugins import InputRecord, Transformation
from dxts.core.plugins.protocols.lifecycle import (
    CleanMode,
    CleanStep,
    Flushed,
    OutputRecord,
    ParcelRecord,
)
from dxts.core.states import InputStatus, ParcelStatus


@dataclass
class MemoryCounts:
    """`Counts` answering what a test sets; an unknown transformation counts zero."""

    input_counts: dict[UUID, dict[InputStatus, int]] = field(default_factory=dict)
    parcel_counts: dict[UUID, dict[ParcelStatus, int]] = field(default_factory=dict)
    calls: int = 0
    # Run once right after the next `inputs` answer, then cleared: a writer that commits between
    # the engine's read of the counts and what it does with them.
    after_read: Callable[[], None] | None = None

    def set(
        self,
        transformation_id: UUID,
        inputs: dict[InputStatus, int] | None = None,
        parcels: dict[ParcelStatus, int] | None = None,
    ) -> None:
        if inputs is not None:
            self.input_counts[transformation_id] = dict(inputs)
        if parcels is not None:
            self.parcel_counts[transformation_id] = dict(parcels)

    async def inputs(self, ids: Sequence[UUID]) -> dict[UUID, dict[InputStatus, int]]:
        self.calls += 1
        answer = {t: dict(self.input_counts.get(t, {})) for t in ids}
        then, self.after_read = self.after_read, None
        if then is not None:
            then()
        return answer

    async def parcels(self, ids: Sequence[UUID]) -> dict[UUID, dict[ParcelStatus, int]]:
        self.calls += 1
        return {t: dict(self.parcel_counts.get(t, {})) for t in ids}


@dataclass
class MemoryExecution:
    """`ExecutionView` and `ExecutionControl` over lists a test fills; every control call is
    recorded in `calls` as (method, transformation id, extra). `clean_batches` says how many
    CleanTransformation calls a transformation takes before it reports complete (default 1);
    `on_cancel` and `on_write_off`, when set, run on those calls (to move the test's counts)."""

    parcel_rows: dict[UUID, list[ParcelRecord]] = field(default_factory=lambda: defaultdict(list))
    input_rows: dict[UUID, list[InputRecord]] = field(default_factory=lambda: defaultdict(list))
    output_rows: dict[UUID, list[OutputRecord]] = field(default_factory=lambda: defaultdict(list))
    success_rows: dict[UUID, list[tuple[UUID, UUID]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    clean_batches: dict[UUID, int] = field(default_factory=dict)
    calls: list[tuple[str, UUID, Any]] = field(default_factory=list)
    on_cancel: Any = None
    on_write_off: Any = None
    flushed: Flushed = field(default_factory=Flushed)  # what every flush answers
    flush_error: Exception | None = None  # what every flush raises instead, when set

    async def parcels(
        self, transformation_id: UUID, statuses: Collection[ParcelStatus] = ()
    ) -> AsyncIterator[ParcelRecord]:
        for parcel in list(self.parcel_rows.get(transformation_id, [])):
            if not statuses or parcel.status in statuses:
                yield parcel

    async def inputs(
        self, transformation_id: UUID, statuses: Collection[InputStatus] = ()
    ) -> AsyncIterator[InputRecord]:
        for item in list(self.input_rows.get(transformation_id, [])):
            if not statuses or item.status in statuses:
                yield item

    async def outputs(self, transformation_id: UUID) -> AsyncIterator[OutputRecord]:
        for output in list(self.output_rows.get(transformation_id, [])):
            yield output

    async def outputs_of(self, transformation_output_id: UUID) -> AsyncIterator[OutputRecord]:
        for rows in list(self.output_rows.values()):
            for output in rows:
                if output.transformation_output_id == transformation_output_id:
                    yield output

    async def successes(self, transformation_id: UUID) -> AsyncIterator[tuple[UUID, UUID]]:
        for pair in list(self.success_rows.get(transformation_id, [])):
            yield pair

    async def flush(self, transformation_id: UUID, *, request_id: str) -> Flushed:
        self.calls.append(("flush", transformation_id, request_id))
        if self.flush_error is not None:
            raise self.flush_error
        return self.flushed

    async def cancel_in_flight(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        self.calls.append(("cancel_in_flight", transformation_id, reason))
        if self.on_cancel is not None:
            self.on_cancel(transformation_id)

    async def write_off_waiting(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        self.calls.append(("write_off_waiting", transformation_id, reason))
        if self.on_write_off is not None:
            self.on_write_off(transformation_id)

    async def clean_transformation(
        self, transformation_id: UUID, mode: CleanMode, *, request_id: str
    ) -> CleanStep:
        self.calls.append(("clean_transformation", transformation_id, mode))
        left = self.clean_batches.get(transformation_id, 1) - 1
        self.clean_batches[transformation_id] = left
        return CleanStep(rows_deleted=100, complete=left <= 0)

    def called(self, method: str) -> list[UUID]:
        return [tid for name, tid, _ in self.calls if name == method]


@dataclass
class MemorySiblings:
    """`Siblings` answering the members a test sets, by workgraph."""

    by_workgraph: dict[UUID, dict[str, Transformation]] = field(default_factory=dict)

    async def members(self, workgraph_id: UUID) -> dict[str, Transformation]:
        return dict(self.by_workgraph.get(workgraph_id, {}))
