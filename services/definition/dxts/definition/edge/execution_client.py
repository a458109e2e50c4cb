"""The execution service over gRPC, as the definition service uses it.

* `GrpcExecutionClient` — the `ExecutionClient` of the operator commands and user jobs: Flush
  (answering what the packer did, its failure included), CancelParcels and WriteOffInputs
  carrying the caller's bearer token (execution applies its
  rights to the same caller); CreateUserParcel with definition's own service token (only a
  service creates a parcel: definition has checked the job is the caller's own);
  `NoExecutionClient` stands in when no address is configured (every forward is UNAVAILABLE);
* `GrpcExecution` — the `ExecutionView` and `ExecutionControl` of the lifecycle engine and the
  built-in actions (dxts's own service token): ListParcels, ListInputs, GetParcel (a parcel's
  inputs, outputs and status report), Flush, CancelParcels, WriteOffInputs, CleanTransformation.
  Execution has no RPC listing a transformation's outputs or parcel inputs, so `outputs` and
  `successes` read each successful parcel with GetParcel: one call per parcel, acceptable for
  the once-per-workgraph finalizing checks that use them. Declared outputs (name, Intermediate,
  producer) are definition's own rows, read through the logic (`logic.lifecycle.views`);
  `NoExecution` stands in when no address is configured.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any
from uuid import UUID

import grpc

from dxts.core.db import Database
from dxts.core.errors import Unavailable
from dxts.core.grpc.convert import enum_from_proto, enum_to_proto, from_json_text, json_text
from dxts.core.ids import hash_to_str, id_from_str, id_to_str
from dxts.core.plugins import InputRecord
from dxts.core.plugins.protocols.lifecycle import (
    SUCCEEDED_PARCELS,
    CleanMode,
    CleanStep,
    FinalParcel,
    Flushed,
    OutputRecord,
    ParcelRecord,
)
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.definition.logic.execution import UserParcel
from dxts.definition.logic.lifecycle.final_parcels import owner_and_process
from dxts.definition.logic.lifecycle.views import declared_outputs, output_producer
from dxts.v1 import common_pb2, execution_pb2, execution_pb2_grpc

# What a halt cancels and writes off: the parcels in flight and the inputs still waiting.
IN_FLIGHT_PARCELS = (ParcelStatus.UNASSIGNED, ParcelStatus.RESERVED, ParcelStatus.ASSIGNED)
WAITING_INPUTS = (InputStatus.UNASSIGNED, InputStatus.FAILED, InputStatus.PROBLEMATIC)


class GrpcExecutionClient:
    """ExecutionClient over `ExecutionService` on a `dxts.core.grpc.channel` (domain errors)."""

    def __init__(
        self, channel: grpc.aio.Channel, token: str | None, *, service_token: str | None = None
    ) -> None:
        self._stub = execution_pb2_grpc.ExecutionServiceStub(channel)
        self._metadata = _bearer(token)
        self._service_metadata = _bearer(service_token)

    async def flush(self, transformation_id: bytes, *, request_id: str) -> Flushed:
        reply = await self._stub.Flush(
            execution_pb2.FlushRequest(
                request_id=request_id, transformation_id=id_to_str(transformation_id)
            ),
            metadata=self._metadata,
        )
        return Flushed(
            offered=reply.inputs_offered,
            parcels=reply.parcels_created,
            assigned=reply.inputs_assigned,
            problematic=reply.inputs_problematic,
            delayed=reply.inputs_delayed,
            failure=reply.failure,
            failure_class=reply.failure_class,
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
            metadata=self._service_metadata,
        )
        return id_from_str(reply.parcel_id, field="parcel_id")

    async def reset_feeders(
        self, transformation_ids: Sequence[bytes], *, clear_bookmarks: bool, request_id: str
    ) -> None:
        await self._stub.ResetFeeders(
            execution_pb2.ResetFeedersRequest(
                request_id=request_id,
                transformation_ids=[id_to_str(t) for t in transformation_ids],
                clear_bookmarks=clear_bookmarks,
            ),
            metadata=self._metadata,
        )


def _bearer(token: str | None) -> tuple[tuple[str, str], ...] | None:
    return (("authorization", f"Bearer {token}"),) if token else None


class NoExecutionClient:
    """Stands in when no execution address is configured: every forward is UNAVAILABLE."""

    def _refuse(self) -> Unavailable:
        return Unavailable(
            "the execution service is not configured (DXTS_EXECUTION_ADDRESS): flushes, halts "
            "and user jobs need it"
        )

    async def flush(self, transformation_id: bytes, *, request_id: str) -> Flushed:
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

    async def reset_feeders(
        self, transformation_ids: Sequence[bytes], *, clear_bookmarks: bool, request_id: str
    ) -> None:
        raise self._refuse()


PAGE_SIZE = 1000
P = ParcelStatus
MODES = {
    CleanMode.ARCHIVE: execution_pb2.CLEAN_MODE_ARCHIVE,
    CleanMode.CLEAN: execution_pb2.CLEAN_MODE_CLEAN,
}


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

    async def _succeeded(
        self, transformation_id: UUID
    ) -> AsyncIterator[tuple[ParcelRecord, execution_pb2.GetParcelResponse]]:
        async for parcel in self.parcels(transformation_id, SUCCEEDED_PARCELS):
            reply = await self._stub.GetParcel(
                execution_pb2.GetParcelRequest(parcel_id=str(parcel.id))
            )
            yield parcel, reply

    async def outputs(self, transformation_id: UUID) -> AsyncIterator[OutputRecord]:
        declared = await declared_outputs(self._database, transformation_id)
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
        producer = await output_producer(self._database, transformation_output_id)
        if producer is None:
            return
        async for output in self.outputs(producer):
            if output.transformation_output_id == transformation_output_id:
                yield output

    async def successes(self, transformation_id: UUID) -> AsyncIterator[tuple[UUID, UUID]]:
        async for parcel, reply in self._succeeded(transformation_id):
            carried = {UUID(i.input_id) for i in reply.inputs}
            if parcel.status is not P.DONE:
                carried &= _reported_successes(reply.outcome.status_report_json)
            for input_id in sorted(carried):
                yield parcel.id, input_id

    async def flush(self, transformation_id: UUID, *, request_id: str) -> Flushed:
        return await self._forward.flush(transformation_id.bytes, request_id=request_id)

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

    async def reset_feeders(
        self, transformation_ids: Sequence[bytes], *, clear_bookmarks: bool, request_id: str
    ) -> None:
        await self._forward.reset_feeders(
            transformation_ids, clear_bookmarks=clear_bookmarks, request_id=request_id
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

    async def create_final_parcel(
        self,
        transformation_id: UUID,
        *,
        process: dict[str, Any],
        parameters: dict[str, Any],
        annotations: dict[str, Any],
        request_id: str,
    ) -> UUID:
        vo, sub, process_id = await owner_and_process(self._database, transformation_id, process)
        parcel = UserParcel(vo, sub, process_id, None, parameters, annotations)
        return UUID(bytes=await self._forward.create_user_parcel(parcel, request_id=request_id))

    async def final_parcel(self, parcel_id: UUID) -> FinalParcel:
        reply = await self._stub.GetParcel(execution_pb2.GetParcelRequest(parcel_id=str(parcel_id)))
        status = enum_from_proto(ParcelStatus, reply.parcel.status, field="status")
        return FinalParcel(parcel_id, status, reply.outcome.message)


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

    async def flush(self, transformation_id: UUID, *, request_id: str) -> Flushed:
        raise _no_execution()

    async def cancel_in_flight(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        raise _no_execution()

    async def write_off_waiting(
        self, transformation_id: UUID, *, request_id: str, reason: str
    ) -> None:
        raise _no_execution()

    async def reset_feeders(
        self, transformation_ids: Sequence[bytes], *, clear_bookmarks: bool, request_id: str
    ) -> None:
        raise _no_execution()

    async def clean_transformation(
        self, transformation_id: UUID, mode: CleanMode, *, request_id: str
    ) -> CleanStep:
        raise _no_execution()

    async def create_final_parcel(
        self,
        transformation_id: UUID,
        *,
        process: dict[str, Any],
        parameters: dict[str, Any],
        annotations: dict[str, Any],
        request_id: str,
    ) -> UUID:
        raise _no_execution()

    async def final_parcel(self, parcel_id: UUID) -> FinalParcel:
        raise _no_execution()
