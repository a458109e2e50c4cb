"""Execution's outcome, operator, provenance, user-job and cleaning RPCs: a mixin of
ExecutionServicer, requests to domain calls and results to replies.

The servicer that inherits it sets `database`, `transformations` (the definition side:
`describe` tells, with the caller's own token, what a transformation is and whether the caller
may see it) and `settings`. Rights, on top of what definition lets the caller see:

* RecordOutcomes — dxts's own components only (the service role: the dispatcher);
* steering a transformation (reset, write off, cancel, clean) — its owner or an operator of its
  VO, or a component; steering a user job — its submitter or an operator of its VO;
* CreateUserParcel — for the caller itself (definition forwards the submitter's token), or a
  component; reading a user job or a provenance — anyone of the VO.

Operations on a transformation are idempotent by request id (`operations.once`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc

from dxts.core.db import Database
from dxts.core.errors import (
    FieldViolation,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from dxts.core.grpc import current_identity
from dxts.core.grpc.auth import bearer_token
from dxts.core.grpc.convert import enum_from_proto, enum_to_proto, json_text, to_timestamp
from dxts.core.grpc.convert import from_json_text as _from_json_text
from dxts.core.ids import hash_from_str, hash_to_str, id_from_str, id_to_str
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.execution import cleaning, operations, outcomes, user_parcels
from dxts.execution.db.operations import OutputRow
from dxts.execution.definition_client import ActiveTransformations, Description
from dxts.execution.operations import Caller
from dxts.execution.settings import ExecutionSettings
from dxts.v1 import execution_pb2

Context = grpc.aio.ServicerContext[Any, Any]

RESET, WRITTEN_OFF, CANCELLED = "InputsReset", "InputsWrittenOff", "ParcelsCancelled"
CLEAN_MODES = {
    execution_pb2.CLEAN_MODE_ARCHIVE: cleaning.CleanMode.ARCHIVE,
    execution_pb2.CLEAN_MODE_CLEAN: cleaning.CleanMode.CLEAN,
}
REASON_MAX = 512


# -- replies from rows ----------------------------------------------------------------------------


def _number(member: Any) -> Any:
    """`enum_to_proto`, typed for the generated fields (a NewType of int)."""
    return enum_to_proto(member)


def _id(value: Any) -> str:
    return id_to_str(bytes(value)) if value else ""


def _hash(value: Any) -> str:
    return hash_to_str(bytes(value)) if value else ""


def input_pb(row: Any) -> execution_pb2.Input:
    """An Inputs row as the contract's Input."""
    return execution_pb2.Input(
        transformation_id=_id(row.TransformationID),
        input_id=_id(row.InputID),
        parent_input_id=_id(row.ParentInputID),
        lfn=row.LFN or "",
        lfn_size=row.LFNSize,
        descriptor_json=json_text(row.Descriptor),
        status=_number(InputStatus(row.Status)),
        error_count=row.ErrorCount,
        delayed_until=to_timestamp(row.DelayedUntil),
        last_parcel_id=_id(row.LastParcelID),
        updated_at=to_timestamp(row.UpdatedAt),
    )


def parcel_pb(row: Any) -> execution_pb2.Parcel:
    """A Parcels row as the contract's Parcel."""
    return execution_pb2.Parcel(
        parcel_id=_id(row.ParcelID),
        transformation_id=_id(row.TransformationID),
        kind=_number(Kind(row.Kind)),
        status=_number(ParcelStatus(row.Status)),
        backend=row.Backend or "",
        annotations_json=json_text(row.Annotations),
        updated_at=to_timestamp(row.UpdatedAt),
        completed_at=to_timestamp(row.CompletedAt),
    )


def output_pb(output: OutputRow) -> execution_pb2.ParcelOutput:
    message = execution_pb2.ParcelOutput(
        output_id=id_to_str(output.output_id),
        transformation_output_id=id_to_str(output.transformation_output_id),
        output_name=output.name,
        parcel_id=id_to_str(output.parcel_id),
        lfn=output.lfn,
    )
    if output.lfn_size is not None:
        message.lfn_size = output.lfn_size
    return message


# -- request fields -------------------------------------------------------------------------------


def _raise_if(problems: list[FieldViolation]) -> None:
    if problems:
        raise InvalidArgument(problems)


def _required_id(text: str, field: str) -> bytes:
    if not text:
        raise InvalidArgument("required", field=field)
    return id_from_str(text, field=field)


def _ids(texts: Sequence[str], field: str) -> list[bytes]:
    problems: list[FieldViolation] = []
    found = []
    for i, text in enumerate(texts):
        try:
            found.append(id_from_str(text, field=f"{field}[{i}]"))
        except InvalidArgument as error:
            problems.extend(error.violations)
    _raise_if(problems)
    return found


def _statuses(enum: type[Any], numbers: Sequence[int], field: str) -> list[str]:
    return [enum_from_proto(enum, n, field=f"{field}[{i}]") for i, n in enumerate(numbers)]


def _selection(
    selection: execution_pb2.InputSelection | execution_pb2.ParcelSelection, enum: type[Any]
) -> tuple[list[bytes] | None, list[str] | None]:
    """(ids, None) or (None, statuses): exactly one of the two, not empty."""
    if bool(selection.statuses) == bool(
        selection.input_ids
        if isinstance(selection, execution_pb2.InputSelection)
        else selection.parcel_ids
    ):
        raise InvalidArgument("give ids or statuses (exactly one)", field="selection")
    if selection.statuses:
        return None, _statuses(enum, selection.statuses, "selection.statuses")
    texts = (
        selection.input_ids
        if isinstance(selection, execution_pb2.InputSelection)
        else selection.parcel_ids
    )
    field = "input_ids" if isinstance(selection, execution_pb2.InputSelection) else "parcel_ids"
    return _ids(texts, f"selection.{field}"), None


class OperationsRpcs:
    """RecordOutcomes, ResetInputs, WriteOffInputs, CancelParcels, Provenance, CreateUserParcel,
    GetUserParcel and CleanTransformation."""

    database: Database
    transformations: ActiveTransformations
    settings: ExecutionSettings

    # -- who asks ---------------------------------------------------------------------------------

    def _caller(self) -> Caller:
        return Caller(
            current_identity(),
            operator_role=self.settings.operator_role,
            service_role=self.settings.service_role,
        )

    async def _describe(self, transformation_id: bytes, context: Context) -> Description:
        """The transformation as the caller sees it (NotFound when it may not)."""
        try:
            token: str | None = bearer_token(context.invocation_metadata())
        except Unauthenticated:  # let in without a token (in-process): execution's own
            token = None
        return await self.transformations.describe(transformation_id, token=token)

    async def _steered(self, transformation_id: bytes, context: Context) -> Description:
        described = await self._describe(transformation_id, context)
        self._caller().check_steers(
            described.vo, described.owner_sub, "transformation", transformation_id
        )
        return described

    # -- from the dispatcher ----------------------------------------------------------------------

    async def RecordOutcomes(
        self, request: execution_pb2.RecordOutcomesRequest, context: Context
    ) -> execution_pb2.RecordOutcomesResponse:
        # The dispatcher's only: the authorisation table, checked before this handler runs.
        acks = await outcomes.record_outcomes(self.database, list(request.outcomes))
        return execution_pb2.RecordOutcomesResponse(acks=acks)

    # -- operator operations ----------------------------------------------------------------------

    async def ResetInputs(
        self, request: execution_pb2.ResetInputsRequest, context: Context
    ) -> execution_pb2.ResetInputsResponse:
        tid = _required_id(request.transformation_id, "transformation_id")
        ids, statuses = _selection(request.selection, InputStatus)
        await self._steered(tid, context)

        async def apply() -> dict[str, int]:
            count = await operations.reset_inputs(
                self.database,
                tid,
                input_ids=ids,
                statuses=statuses,
                batch=self.settings.operation_batch,
            )
            return {"reset": count}

        result = await self._once(tid, RESET, request.request_id, request.reason, apply)
        return execution_pb2.ResetInputsResponse(reset_count=result.get("reset", 0))

    async def WriteOffInputs(
        self, request: execution_pb2.WriteOffInputsRequest, context: Context
    ) -> execution_pb2.WriteOffInputsResponse:
        tid = _required_id(request.transformation_id, "transformation_id")
        ids, statuses = _selection(request.selection, InputStatus)
        await self._steered(tid, context)

        async def apply() -> dict[str, int]:
            count = await operations.write_off_inputs(
                self.database,
                tid,
                input_ids=ids,
                statuses=statuses,
                batch=self.settings.operation_batch,
            )
            return {"written_off": count}

        result = await self._once(tid, WRITTEN_OFF, request.request_id, request.reason, apply)
        return execution_pb2.WriteOffInputsResponse(written_off_count=result.get("written_off", 0))

    async def CancelParcels(
        self, request: execution_pb2.CancelParcelsRequest, context: Context
    ) -> execution_pb2.CancelParcelsResponse:
        ids, statuses = _selection(request.selection, ParcelStatus)
        reason = request.reason[:REASON_MAX]
        if request.transformation_id:
            tid = _required_id(request.transformation_id, "transformation_id")
            await self._steered(tid, context)

            async def apply() -> dict[str, int]:
                done = await operations.cancel_parcels(
                    self.database,
                    parcel_ids=ids,
                    transformation_id=tid,
                    statuses=statuses,
                    reason=reason,
                    batch=self.settings.operation_batch,
                )
                return {"cancelled": done.cancelled, "cancel_requested": done.cancel_requested}

            result = await self._once(tid, CANCELLED, request.request_id, reason, apply)
        else:
            if ids is None:
                raise InvalidArgument(
                    "statuses select the parcels of one transformation: give its id",
                    field="transformation_id",
                )
            await self._check_parcels_steered(ids, context)
            done = await operations.cancel_parcels(
                self.database, parcel_ids=ids, reason=reason, batch=self.settings.operation_batch
            )
            result = {"cancelled": done.cancelled, "cancel_requested": done.cancel_requested}
        return execution_pb2.CancelParcelsResponse(
            cancelled_count=result.get("cancelled", 0),
            cancel_requested_count=result.get("cancel_requested", 0),
        )

    async def _check_parcels_steered(self, parcel_ids: Sequence[bytes], context: Context) -> None:
        owners = await operations.parcel_owners(self.database, parcel_ids)
        caller = self._caller()
        for parcel_id in parcel_ids:
            if parcel_id not in owners:
                raise NotFound("parcel", id_to_str(parcel_id))
            tid, vo, sub = owners[parcel_id]
            if tid is None:
                caller.check_steers(vo or "", sub or "", "parcel", parcel_id)
        for tid in sorted({tid for tid, _, _ in owners.values() if tid is not None}):
            await self._steered(tid, context)

    async def _once(
        self, tid: bytes, event: str, request_id: str, reason: str, apply: Any
    ) -> dict[str, int]:
        return await operations.once(
            self.database,
            tid,
            event,
            request_id,
            apply,
            author=self._caller().identity.sub,
            reason=reason[:REASON_MAX],
        )

    async def CleanTransformation(
        self, request: execution_pb2.CleanTransformationRequest, context: Context
    ) -> execution_pb2.CleanTransformationResponse:
        tid = _required_id(request.transformation_id, "transformation_id")
        mode = CLEAN_MODES.get(request.mode)
        if mode is None:
            raise InvalidArgument("CLEAN_MODE_ARCHIVE or CLEAN_MODE_CLEAN", field="mode")
        described = await self._steered(tid, context)
        cleaning.check_mode(mode, described.status, tid)
        step = await cleaning.clean_transformation(
            self.database, tid, max_rows=self.settings.clean_max_rows
        )
        return execution_pb2.CleanTransformationResponse(
            rows_deleted=step.rows_deleted, complete=step.complete
        )

    # -- provenance -------------------------------------------------------------------------------

    async def Provenance(
        self, request: execution_pb2.ProvenanceRequest, context: Context
    ) -> execution_pb2.ProvenanceResponse:
        records = await operations.provenance(
            self.database, request.lfn, max_depth=request.max_depth
        )
        visible = await self._visible(
            {bytes(r.parcel.TransformationID) for r in records if r.parcel.TransformationID},
            context,
        )
        shown = [
            r
            for r in records
            if r.parcel.TransformationID and bytes(r.parcel.TransformationID) in visible
        ]
        if not shown:
            raise NotFound("file", request.lfn)
        return execution_pb2.ProvenanceResponse(
            records=[
                execution_pb2.ProvenanceRecord(
                    output=output_pb(r.output),
                    parcel=parcel_pb(r.parcel),
                    process_id=_hash(r.parcel.ProcessID),
                    inputs=[input_pb(i) for i in r.inputs],
                )
                for r in shown
            ]
        )

    async def _visible(self, transformation_ids: set[bytes], context: Context) -> set[bytes]:
        """The transformations among these the caller may see."""

        async def sees(tid: bytes) -> bytes | None:
            try:
                await self._describe(tid, context)
            except NotFound:
                return None
            return tid

        found = await asyncio.gather(*(sees(tid) for tid in sorted(transformation_ids)))
        return {tid for tid in found if tid is not None}

    # -- user parcels -----------------------------------------------------------------------------

    async def CreateUserParcel(
        self, request: execution_pb2.CreateUserParcelRequest, context: Context
    ) -> execution_pb2.CreateUserParcelResponse:
        caller = self._caller()
        problems: list[FieldViolation] = []
        process_id = requirements_id = None
        try:
            process_id = hash_from_str(request.process_id, field="process_id")
        except InvalidArgument as error:
            problems.extend(error.violations)
        if request.requirements_id:
            try:
                requirements_id = hash_from_str(request.requirements_id, field="requirements_id")
            except InvalidArgument as error:
                problems.extend(error.violations)
        documents = {}
        for field in ("parameters_json", "annotations_json"):
            try:
                documents[field] = _from_json_text(getattr(request, field), field=field)
            except InvalidArgument as error:
                problems.extend(error.violations)
        _raise_if(problems)
        assert process_id is not None
        if not caller.is_service and (caller.identity.vo, caller.identity.sub) != (
            request.vo,
            request.owner_sub,
        ):
            raise PermissionDenied("a job is created for its submitter only")
        parcel_id = await user_parcels.create_user_parcel(
            self.database,
            user_parcels.UserJob(
                vo=request.vo,
                sub=request.owner_sub,
                process_id=process_id,
                requirements_id=requirements_id,
                parameters=documents["parameters_json"],
                annotations=documents["annotations_json"],
            ),
            request_id=request.request_id,
        )
        return execution_pb2.CreateUserParcelResponse(parcel_id=id_to_str(parcel_id))

    async def GetUserParcel(
        self, request: execution_pb2.GetUserParcelRequest, context: Context
    ) -> execution_pb2.GetUserParcelResponse:
        parcel_id = _required_id(request.parcel_id, "parcel_id")
        view = await user_parcels.get_user_parcel(self.database, parcel_id)
        row = view.parcel
        if not self._caller().sees(row.VO):
            raise NotFound("user parcel", request.parcel_id)
        reply = execution_pb2.GetUserParcelResponse(
            parcel=parcel_pb(row),
            compute=execution_pb2.ComputeFacet(
                process_id=hash_to_str(bytes(row.ProcessID)) if row.ProcessID else "",
                requirements_id=hash_to_str(bytes(row.RequirementsID))
                if row.RequirementsID
                else "",
                resolved_hints_id=hash_to_str(bytes(row.ResolvedHintsID))
                if row.ResolvedHintsID
                else "",
                parameters_json=json_text(row.Parameters),
            ),
            outputs=[
                execution_pb2.ParcelOutput(
                    output_name=f.output_name,
                    parcel_id=request.parcel_id,
                    lfn=f.lfn,
                    lfn_size=f.size,
                )
                for f in view.outputs
            ],
            vo=row.VO,
            owner_sub=row.Sub,
        )
        if view.outcome is not None:
            reply.outcome.CopyFrom(view.outcome)
        return reply
