"""What the lifecycle engine and the built-in actions get from accounting and execution.

The Protocols are core's (`dxts.core.plugins.protocols.lifecycle`: the built-ins live in core and
declare what they need by annotation). Here are their implementations:

* `GrpcCounts` — `AccountingService.GetCounts` (exact counters, up to 1000 ids per call);
* `GrpcExecution` — `ExecutionService`: ListParcels, ListInputs, GetParcel (a parcel's inputs,
  outputs and status report), Flush, CancelParcels, WriteOffInputs, CleanTransformation.
  Execution has no RPC listing a transformation's outputs or parcel inputs, so `outputs` and
  `successes` read each successful parcel with GetParcel: one call per parcel, acceptable for
  the once-per-workgraph finalizing checks that use them. Declared outputs (name, Intermediate,
  producer) are definition's own rows, read here directly;
* `DefinitionSiblings` — a workgraph's members, from definition's own rows;
* `NoCounts`, `NoExecution` — stand-ins when an address is not configured: every call is
  UNAVAILABLE, which the engine reports and retries like any unavailable peer;
* `MemoryCounts`, `MemoryExecution`, `MemorySiblings` — in-memory doubles for tests (this
  package's and the end-to-end scenarios'): set what they answer, read what they were asked.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import grpc

from dxts.core.db import Database, Isolation
from dxts.core.errors import Unavailable
from dxts.core.grpc.convert import enum_from_proto, enum_to_proto, from_json_text
from dxts.core.plugins import InputRecord, Transformation
from dxts.core.plugins.protocols.lifecycle import (
    SUCCEEDED_PARCELS,
    CleanMode,
    CleanStep,
    OutputRecord,
    ParcelRecord,
)
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.definition import db
from dxts.definition.execution_client import GrpcExecutionClient
from dxts.definition.lifecycle.views import name_of, read_workgraph, transformation_view
from dxts.v1 import (
    accounting_pb2,
    accounting_pb2_grpc,
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
)

COUNTS_PER_CALL = 1000  # GetCounts' limit
PAGE_SIZE = 1000
P = ParcelStatus
MODES = {
    CleanMode.ARCHIVE: execution_pb2.CLEAN_MODE_ARCHIVE,
    CleanMode.CLEAN: execution_pb2.CLEAN_MODE_CLEAN,
}


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


def _paging(token: str) -> common_pb2.Paging:
    return common_pb2.Paging(page_size=PAGE_SIZE, page_token=token)


def _input(item: execution_pb2.Input) -> InputRecord:
    descriptor = from_json_text(item.descriptor_json, field="descriptor_json")
    return InputRecord(
        id=UUID(item.input_id),
        lfn=item.lfn or None,
        lfn_size=item.lfn_size if item.HasField("lfn_size") else None,
        descriptor=descriptor if isinstance(descriptor, dict) else None,
        status=enum_from_proto(InputStatus, item.status, field="status"),
        error_count=item.error_count,
        parent_id=UUID(item.parent_input_id) if item.parent_input_id else None,
    )


def _parcel(item: execution_pb2.Parcel) -> ParcelRecord:
    annotations = from_json_text(item.annotations_json, field="annotations_json")
    return ParcelRecord(
        id=UUID(item.parcel_id),
        kind=enum_from_proto(Kind, item.kind, field="kind"),
        status=enum_from_proto(ParcelStatus, item.status, field="status"),
        backend=item.backend or None,
        annotations=annotations if isinstance(annotations, dict) else {},
    )


def _reported_successes(report_json: str) -> set[UUID]:
    """The inputs a status report calls SUCCESS (a split parent's portions are other inputs)."""
    try:
        report = json.loads(report_json) if report_json else {}
    except ValueError:
        return set()
    found = set()
    for key, entry in report.items() if isinstance(report, dict) else ():
        if isinstance(entry, dict) and entry.get("action") == "SUCCESS":
            try:
                found.add(UUID(key))
            except ValueError:
                continue
    return found


class GrpcExecution:
    """`ExecutionView` and `ExecutionControl` over ExecutionService; declared outputs are read
    from definition's own tables in `database`."""

    def __init__(self, channel: grpc.aio.Channel, database: Database) -> None:
        self._stub = execution_pb2_grpc.ExecutionServiceStub(channel)
        self._forward = GrpcExecutionClient(channel, None)
        self._database = database

    async def parcels(
        self, transformation_id: UUID, statuses: Collection[ParcelStatus] = ()
    ) -> AsyncIterator[ParcelRecord]:
        token = ""
        while True:
            reply = await self._stub.ListParcels(
                execution_pb2.ListParcelsRequest(
                    paging=_paging(token),
                    transformation_id=str(transformation_id),
                    statuses=[enum_to_proto(s) for s in statuses],  # type: ignore[misc]
                )
            )
            for item in reply.parcels:
                yield _parcel(item)
            token = reply.next_page_token
            if not token:
                return

    async def inputs(
        self, transformation_id: UUID, statuses: Collection[InputStatus] = ()
    ) -> AsyncIterator[InputRecord]:
        token = ""
        while True:
            reply = await self._stub.ListInputs(
                execution_pb2.ListInputsRequest(
                    paging=_paging(token),
                    transformation_id=str(transformation_id),
                    statuses=[enum_to_proto(s) for s in statuses],  # type: ignore[misc]
                )
            )
            for item in reply.inputs:
                yield _input(item)
            token = reply.next_page_token
            if not token:
                return

    async def _declared(self, transformation_id: UUID) -> dict[UUID, tuple[str, bool]]:
        async with self._database.transaction(Isolation.READ_COMMITTED) as conn:
            rows = await db.outputs_of(conn, [transformation_id.bytes])
        return {
            UUID(bytes=bytes(r.TransformationOutputID)): (r.Name, bool(r.Intermediate))
            for r in rows
        }

    async def _succeeded(
        self, transformation_id: UUID
    ) -> AsyncIterator[tuple[ParcelRecord, execution_pb2.GetParcelResponse]]:
        async for parcel in self.parcels(transformation_id, SUCCEEDED_PARCELS):
            reply = await self._stub.GetParcel(
                execution_pb2.GetParcelRequest(parcel_id=str(parcel.id))
            )
            yield parcel, reply

    async def outputs(self, transformation_id: UUID) -> AsyncIterator[OutputRecord]:
        declared = await self._declared(transformation_id)
        async for _, reply in self._succeeded(transformation_id):
            for item in reply.outputs:
                output_id = UUID(item.transformation_output_id)
                name, intermediate = declared.get(output_id, (item.output_name, False))
                yield OutputRecord(
                    transformation_output_id=output_id,
                    name=name,
                    intermediate=intermediate,
                    parcel_id=UUID(item.parcel_id),
                    lfn=item.lfn,
                    size=item.lfn_size if item.HasField("lfn_size") else None,
                )

    async def outputs_of(self, transformation_output_id: UUID) -> AsyncIterator[OutputRecord]:
        async with self._database.transaction(Isolation.READ_COMMITTED) as conn:
            producers = await db.output_producers(conn, [transformation_output_id.bytes])
        producer = producers.get(transformation_output_id.bytes)
        if producer is None:
            return
        async for output in self.outputs(UUID(bytes=producer)):
            if output.transformation_output_id == transformation_output_id:
                yield output

    async def successes(self, transformation_id: UUID) -> AsyncIterator[tuple[UUID, UUID]]:
        async for parcel, reply in self._succeeded(transformation_id):
            carried = {UUID(i.input_id) for i in reply.inputs}
            if parcel.status is not P.DONE:
                carried &= _reported_successes(reply.outcome.status_report_json)
            for input_id in sorted(carried):
                yield parcel.id, input_id

    async def flush(self, transformation_id: UUID, *, request_id: str) -> None:
        await self._forward.flush(transformation_id.bytes, request_id=request_id)

    async def cancel_in_flight(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        await self._forward.cancel_in_flight(
            transformation_id.bytes, request_id=request_id, reason=reason
        )

    async def write_off_waiting(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        await self._forward.write_off_waiting(
            transformation_id.bytes, request_id=request_id, reason=reason
        )

    async def clean_transformation(
        self, transformation_id: UUID, mode: CleanMode, *, request_id: str
    ) -> CleanStep:
        reply = await self._stub.CleanTransformation(
            execution_pb2.CleanTransformationRequest(
                request_id=request_id,
                transformation_id=str(transformation_id),
                mode=MODES[mode],
            )
        )
        return CleanStep(reply.rows_deleted, reply.complete)


class DefinitionSiblings:
    """`Siblings` from the definition service's own rows."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def members(self, workgraph_id: UUID) -> dict[str, Transformation]:
        detail = await read_workgraph(self._database, workgraph_id.bytes)
        return {name_of(m): transformation_view(m) for m in detail.members}


# -- not configured -----------------------------------------------------------------------------


class NoCounts:
    async def inputs(self, ids: Sequence[UUID]) -> dict[UUID, dict[InputStatus, int]]:
        raise Unavailable("exact counts need the accounting service: set DXTS_ACCOUNTING_ADDRESS")

    async def parcels(self, ids: Sequence[UUID]) -> dict[UUID, dict[ParcelStatus, int]]:
        raise Unavailable("exact counts need the accounting service: set DXTS_ACCOUNTING_ADDRESS")


def _no_execution() -> Unavailable:
    return Unavailable("the lifecycle needs the execution service: set DXTS_EXECUTION_ADDRESS")


class NoExecution:
    async def parcels(
        self, transformation_id: UUID, statuses: Collection[ParcelStatus] = ()
    ) -> AsyncIterator[ParcelRecord]:
        raise _no_execution()
        yield  # pragma: no cover - makes this an async generator

    async def inputs(
        self, transformation_id: UUID, statuses: Collection[InputStatus] = ()
    ) -> AsyncIterator[InputRecord]:
        raise _no_execution()
        yield  # pragma: no cover

    async def outputs(self, transformation_id: UUID) -> AsyncIterator[OutputRecord]:
        raise _no_execution()
        yield  # pragma: no cover

    async def outputs_of(self, transformation_output_id: UUID) -> AsyncIterator[OutputRecord]:
        raise _no_execution()
        yield  # pragma: no cover

    async def successes(self, transformation_id: UUID) -> AsyncIterator[tuple[UUID, UUID]]:
        raise _no_execution()
        yield  # pragma: no cover

    async def flush(self, transformation_id: UUID, *, request_id: str) -> None:
        raise _no_execution()

    async def cancel_in_flight(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        raise _no_execution()

    async def write_off_waiting(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        raise _no_execution()

    async def clean_transformation(
        self, transformation_id: UUID, mode: CleanMode, *, request_id: str
    ) -> CleanStep:
        raise _no_execution()


# -- doubles ------------------------------------------------------------------------------------


@dataclass
class MemoryCounts:
    """`Counts` answering what a test sets; an unknown transformation counts zero."""

    input_counts: dict[UUID, dict[InputStatus, int]] = field(default_factory=dict)
    parcel_counts: dict[UUID, dict[ParcelStatus, int]] = field(default_factory=dict)
    calls: int = 0

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
        return {t: dict(self.input_counts.get(t, {})) for t in ids}

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

    async def flush(self, transformation_id: UUID, *, request_id: str) -> None:
        self.calls.append(("flush", transformation_id, request_id))

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
