"""Execution's outcome, operator, provenance, user-job and cleaning RPCs: a mixin of
ExecutionServicer, requests to domain calls and results to replies.

The servicer that inherits it sets `database`, `transformations` (the definition side:
`describe` tells, with the caller's own token, what a transformation is and whether the caller
may see it), `locks` and `settings`. Rights, on top of what definition lets the caller see:

* RecordOutcomes — dxts's own components only (the service role: the dispatcher);
* steering a transformation (reset, write off, decide a Failed input, cancel, clean) — its owner
  or an operator of its VO, or a component; steering a user job — its submitter or an operator
  of its VO;
* CreateUserParcel — for the caller itself (definition forwards the submitter's token), or a
  component; reading a user job or a provenance — anyone of the VO.

Commands on a transformation apply once per request id (`logic.commands`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc

from dxts.core.adaptor.mapping import ack_to_proto, outcome_from_proto, outcome_to_proto
from dxts.core.db import Database
from dxts.core.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from dxts.core.grpc.auth import bearer_token
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.grpc.convert import from_json_text as _from_json_text
from dxts.core.grpc.paging import (
    decode_page_token,
    encode_page_token,
    filters_fingerprint,
    page_size,
)
from dxts.core.grpc.requests import PAGE_TOKEN, Problems, required_id
from dxts.core.identity import current_identity
from dxts.core.ids import id_to_str
from dxts.core.kernel.commands import Request
from dxts.core.locks import LockManager
from dxts.core.states import InputStatus, ParcelStatus
from dxts.execution.edge.mapping import (
    compute_facet_pb,
    decision_of,
    hash_text,
    input_pb,
    output_pb,
    parcel_pb,
    selection_of,
)
from dxts.execution.logic import (
    cleaning,
    commands,
    decisions,
    lineage,
    operations,
    parcel_names,
    recording,
    user_parcels,
)
from dxts.execution.logic.operations import Caller
from dxts.execution.logic.transformations import ActiveTransformations, Description
from dxts.execution.settings import ExecutionSettings
from dxts.v1 import common_pb2, execution_pb2

Context = grpc.aio.ServicerContext[Any, Any]

CLEAN_MODES = {
    execution_pb2.CLEAN_MODE_ARCHIVE: cleaning.CleanMode.ARCHIVE,
    execution_pb2.CLEAN_MODE_CLEAN: cleaning.CleanMode.CLEAN,
}
REASON_MAX = 512


async def record_outcome_messages(
    database: Database, outcomes: Iterable[common_pb2.Outcome]
) -> list[common_pb2.OutcomeAck]:
    """RecordOutcomes once the caller is let in: the messages recorded, the acks in order."""
    acks = await recording.record_outcomes(database, [outcome_from_proto(o) for o in outcomes])
    return [ack_to_proto(ack) for ack in acks]


class OperationsRpcs:
    """RecordOutcomes, ResetInputs, WriteOffInputs, DecideFailedInput, CancelParcels,
    Provenance, CreateUserParcel, GetUserParcel and CleanTransformation."""

    database: Database
    transformations: ActiveTransformations
    locks: LockManager
    settings: ExecutionSettings
    # Told when parcels became Completing (outcomes recorded) and Unassigned (a user job), so
    # that the sweep taking them next starts now instead of sleeping out its idle wait: the
    # recorder's (build_execution), and in one process the dispatcher's claims (`dxts up`).
    parcels_completing: Callable[[], None]
    parcels_unassigned: Callable[[], None]

    # -- who asks ---------------------------------------------------------------------------------

    def _request(self, request_id: str, reason: str = "") -> Request:
        """The command the call being served asks for (named after its RPC), by its caller."""
        return Request.served(current_identity(), request_id, reason[:REASON_MAX])

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

    async def _describe_many(self, ids: list[bytes], context: Context) -> list[Description]:
        """`_describe` of each, in one call per MAX_ITEMS ids."""
        try:
            token: str | None = bearer_token(context.invocation_metadata())
        except Unauthenticated:
            token = None
        return await self.transformations.describe_many(ids, token=token)

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
        acks = await record_outcome_messages(self.database, request.outcomes)
        if acks:
            self.parcels_completing()
        return execution_pb2.RecordOutcomesResponse(acks=acks)

    # -- operator operations ----------------------------------------------------------------------

    async def ResetInputs(
        self, request: execution_pb2.ResetInputsRequest, context: Context
    ) -> execution_pb2.ResetInputsResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        ids, statuses = selection_of(request.selection, InputStatus)
        await self._steered(tid, context)
        count = await commands.reset_inputs(
            self.database,
            self.locks,
            self._request(request.request_id, request.reason),
            tid,
            input_ids=ids,
            statuses=statuses,
            batch=self.settings.operation_batch,
        )
        return execution_pb2.ResetInputsResponse(reset_count=count)

    async def WriteOffInputs(
        self, request: execution_pb2.WriteOffInputsRequest, context: Context
    ) -> execution_pb2.WriteOffInputsResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        ids, statuses = selection_of(request.selection, InputStatus)
        await self._steered(tid, context)
        count = await commands.write_off_inputs(
            self.database,
            self.locks,
            self._request(request.request_id, request.reason),
            tid,
            input_ids=ids,
            statuses=statuses,
            batch=self.settings.operation_batch,
        )
        return execution_pb2.WriteOffInputsResponse(written_off_count=count)

    async def DecideFailedInput(
        self, request: execution_pb2.DecideFailedInputRequest, context: Context
    ) -> execution_pb2.DecideFailedInputResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        input_id = required_id(request.input_id, "input_id")
        reason = request.reason.strip()[:REASON_MAX]
        if not reason:
            raise InvalidArgument("say why: the log keeps it with the decision", field="reason")
        decision = decision_of(request, reason)
        await self._steered(tid, context)
        decided = await decisions.decide_failed_input(
            self.database, self._request(request.request_id, reason), tid, input_id, decision
        )
        return execution_pb2.DecideFailedInputResponse(
            status=enum_to_proto(decided.status),  # type: ignore[arg-type]
            child_input_ids=[id_to_str(child) for child in decided.children],
        )

    async def CancelParcels(
        self, request: execution_pb2.CancelParcelsRequest, context: Context
    ) -> execution_pb2.CancelParcelsResponse:
        ids, statuses = selection_of(request.selection, ParcelStatus)
        reason = request.reason[:REASON_MAX]
        if request.transformation_id:
            tid = required_id(request.transformation_id, "transformation_id")
            await self._steered(tid, context)
            done = await commands.cancel_parcels(
                self.database,
                self.locks,
                self._request(request.request_id, reason),
                tid,
                parcel_ids=ids,
                statuses=statuses,
                batch=self.settings.operation_batch,
            )
        else:
            if ids is None:
                raise InvalidArgument(
                    "statuses select the parcels of one transformation: give its id",
                    field="transformation_id",
                )
            await self._check_parcels_steered(ids, context)
            # User parcels have no log to record a request id in: cancelling is idempotent.
            done = await operations.cancel_parcels(
                self.database, parcel_ids=ids, reason=reason, batch=self.settings.operation_batch
            )
        return execution_pb2.CancelParcelsResponse(
            cancelled_count=done.cancelled, cancel_requested_count=done.cancel_requested
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

    async def CleanTransformation(
        self, request: execution_pb2.CleanTransformationRequest, context: Context
    ) -> execution_pb2.CleanTransformationResponse:
        tid = required_id(request.transformation_id, "transformation_id")
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
            {r.parcel.transformation_id for r in records if r.parcel.transformation_id},
            context,
        )
        shown = [
            r
            for r in records
            if r.parcel.transformation_id and r.parcel.transformation_id in visible
        ]
        if not shown:
            raise NotFound("file", request.lfn)
        named = await parcel_names.handles_of(self.database, [r.parcel.parcel_id for r in shown])
        return execution_pb2.ProvenanceResponse(
            records=[
                execution_pb2.ProvenanceRecord(
                    output=output_pb(r.output),
                    parcel=parcel_pb(r.parcel, named.get(r.parcel.parcel_id, "")),
                    process_id=hash_text(r.parcel.process_id),
                    inputs=[input_pb(i) for i in r.inputs],
                )
                for r in shown
            ]
        )

    async def ListDescendants(
        self, request: execution_pb2.ListDescendantsRequest, context: Context
    ) -> execution_pb2.ListDescendantsResponse:
        begin = None
        if request.transformation_id or request.input_id:
            begin = (
                required_id(request.transformation_id, "transformation_id"),
                required_id(request.input_id, "input_id"),
            )
            if request.lfn:
                raise InvalidArgument("give lfn or an input, not both", field="lfn")
            if begin[0] not in await self._visible({begin[0]}, context):
                raise NotFound("input", request.input_id)
        fingerprint = filters_fingerprint(
            request.lfn, request.max_depth, request.transformation_id, request.input_id
        )
        position = decode_page_token(request.paging, filters=fingerprint, field=PAGE_TOKEN)
        start = lineage.resume_key(position, field=PAGE_TOKEN)
        size = page_size(request.paging)
        walk = await lineage.descendants(
            self.database, request.lfn, max_depth=request.max_depth, start=begin
        )
        visible = await self._visible({r.input.transformation_id for r in walk.records}, context)
        shown = [
            r
            for r in walk.records
            if r.input.transformation_id in visible and (start is None or r.key > start)
        ]
        if not shown and start is None:
            if begin is not None:
                raise NotFound("input", request.input_id)
            raise NotFound("file", request.lfn)
        page = shown[:size]
        token = ""
        if len(shown) > size:
            token = encode_page_token(lineage.position(page[-1].key), filters=fingerprint)
        named = await parcel_names.handles_of(
            self.database, [r.parcel.parcel_id for r in page if r.parcel is not None]
        )
        return execution_pb2.ListDescendantsResponse(
            records=[
                execution_pb2.DescendantRecord(
                    depth=r.depth,
                    input=input_pb(r.input),
                    parcel=parcel_pb(r.parcel, named.get(r.parcel.parcel_id, ""))
                    if r.parcel is not None
                    else None,
                    process_id=hash_text(r.parcel.process_id) if r.parcel is not None else "",
                    outputs=[output_pb(o) for o in r.outputs],
                )
                for r in page
            ],
            next_page_token=token,
            truncated=walk.truncated,
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
        problems = Problems()
        process_id = problems.hash(request.process_id, "process_id")
        requirements_id = problems.hash(request.requirements_id, "requirements_id", required=False)
        documents = {}
        for field in ("parameters_json", "annotations_json"):
            try:
                documents[field] = _from_json_text(getattr(request, field), field=field)
            except InvalidArgument as error:
                problems.violations.extend(error.violations)
        problems.raise_if_any()
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
            locks=self.locks,
        )
        self.parcels_unassigned()
        return execution_pb2.CreateUserParcelResponse(parcel_id=id_to_str(parcel_id))

    async def GetUserParcel(
        self, request: execution_pb2.GetUserParcelRequest, context: Context
    ) -> execution_pb2.GetUserParcelResponse:
        parcel_id = required_id(request.parcel_id, "parcel_id")
        view = await user_parcels.get_user_parcel(self.database, parcel_id)
        record = view.record
        if not self._caller().sees(record.submitter.vo):
            raise NotFound("user parcel", request.parcel_id)
        named = await parcel_names.handles_of(self.database, [parcel_id])
        reply = execution_pb2.GetUserParcelResponse(
            parcel=parcel_pb(record.parcel, named.get(parcel_id, "")),
            compute=compute_facet_pb(record.compute),
            outputs=[
                execution_pb2.ParcelOutput(
                    output_name=f.output_name,
                    parcel_id=request.parcel_id,
                    lfn=f.lfn,
                    lfn_size=f.size,
                )
                for f in view.outputs
            ],
            vo=record.submitter.vo,
            owner_sub=record.submitter.sub,
        )
        if view.outcome is not None:
            reply.outcome.CopyFrom(outcome_to_proto(view.outcome))
        return reply
