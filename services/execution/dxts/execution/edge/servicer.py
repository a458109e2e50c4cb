"""ExecutionService: requests to domain calls and results to replies, nothing else.

This part serves reading (ListInputs, GetInput, ListParcels, GetParcel, GroupFailures), Flush
and ResetFeeders; the
operator, outcome, provenance, user-job and cleaning RPCs come from `OperationsRpcs`.

Rights: what a caller may see of a transformation is decided by the definition side
(`describe`, with the caller's own token: NotFound otherwise), so a transformation's inputs and
parcels are shown to whoever may see the transformation. A user parcel is shown to its VO.
Listing parcels across transformations is for dxts's components (the service role); anyone else
gets the user parcels of its VO. A flush or a feeder reset steers the transformation: its
owner, an operator of its VO, or a component.
"""

from __future__ import annotations

from dxts.core.adaptor.mapping import outcome_to_proto
from dxts.core.db import Database
from dxts.core.deadlines import time_remaining
from dxts.core.errors import NotFound
from dxts.core.grpc.convert import enum_from_proto, from_timestamp, json_text, to_timestamp
from dxts.core.grpc.paging import filters_fingerprint, page_size
from dxts.core.grpc.requests import Problems, next_page_token, page_after, required_id
from dxts.core.locks import LockManager
from dxts.core.plugins import Registry
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.execution.edge.mapping import (
    compute_facet_pb,
    failure_group_pb,
    id_text,
    input_pb,
    output_pb,
    parcel_pb,
)
from dxts.execution.edge.servicer_operations import Context, OperationsRpcs
from dxts.execution.logic import commands, failure_groups, parcel_names, parcel_times, queries
from dxts.execution.logic.feeding import reset_feeders
from dxts.execution.logic.parcel_annotations import stored_outcome
from dxts.execution.logic.transformations import ActiveSnapshot, ActiveTransformations
from dxts.execution.settings import ExecutionSettings
from dxts.v1 import execution_pb2, execution_pb2_grpc

# How long a Flush waits for a packer invocation already running (a sweep's) to finish, at
# most, checking this often; it gives up early enough before the call's deadline (the margin)
# for its answer to reach the caller.
FLUSH_WAIT_S = 60.0
FLUSH_MARGIN_S = 0.5


def _nothing() -> None:
    """Nobody to tell (see OperationsRpcs.parcels_completing)."""


class ExecutionServicer(OperationsRpcs, execution_pb2_grpc.ExecutionServiceServicer):
    def __init__(
        self,
        database: Database,
        *,
        transformations: ActiveTransformations,
        snapshot: ActiveSnapshot,
        registry: Registry,
        locks: LockManager,
        settings: ExecutionSettings,
    ) -> None:
        self.database = database
        self.transformations = transformations
        self.snapshot = snapshot
        self.registry = registry
        self.locks = locks
        self.settings = settings
        self.failure_folds = failure_groups.FailureFolds()
        self.parcels_completing = _nothing
        self.parcels_unassigned = _nothing

    # -- inputs -----------------------------------------------------------------------------------

    async def ListInputs(
        self, request: execution_pb2.ListInputsRequest, context: Context
    ) -> execution_pb2.ListInputsResponse:
        problems = Problems()
        tid = problems.id(request.transformation_id, "transformation_id")
        parent = problems.id(request.parent_input_id, "parent_input_id", required=False)
        statuses = problems.enums(InputStatus, request.statuses, "statuses")
        problems.raise_if_any()
        assert tid is not None
        limit = page_size(request.paging)
        fingerprint = filters_fingerprint(
            request.transformation_id, statuses, request.lfn, request.parent_input_id
        )
        after = page_after(request.paging, fingerprint)
        await self._describe(tid, context)
        page = await queries.list_inputs(
            self.database,
            tid,
            statuses=statuses,
            lfn=request.lfn,
            parent_id=parent,
            after=after,
            limit=limit,
        )
        return execution_pb2.ListInputsResponse(
            inputs=[input_pb(row) for row in page.items],
            next_page_token=next_page_token(page.last, fingerprint),
        )

    async def GetInput(
        self, request: execution_pb2.GetInputRequest, context: Context
    ) -> execution_pb2.GetInputResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        input_id = required_id(request.input_id, "input_id")
        await self._describe(tid, context)
        detail = await queries.get_input(self.database, tid, input_id)
        reply = execution_pb2.GetInputResponse(
            input=input_pb(detail.input),
            parcels=[parcel_pb(row) for row in detail.parcels],
            children=[input_pb(row) for row in detail.children],
            inherited_parcels=[parcel_pb(row) for row in detail.inherited],
        )
        if detail.parent is not None:
            reply.parent.CopyFrom(input_pb(detail.parent))
        return reply

    # -- parcels ----------------------------------------------------------------------------------

    async def ListParcels(
        self, request: execution_pb2.ListParcelsRequest, context: Context
    ) -> execution_pb2.ListParcelsResponse:
        problems = Problems()
        tid = problems.id(request.transformation_id, "transformation_id", required=False)
        process_id = problems.hash(request.process_id, "process_id", required=False)
        statuses = problems.enums(ParcelStatus, request.statuses, "statuses")
        problems.raise_if_any()
        kind = enum_from_proto(Kind, request.kind, field="kind").value if request.kind else None
        caller = self._caller()
        user_vo = None
        if tid is not None:
            await self._describe(tid, context)
        elif not caller.is_service:
            user_vo = caller.identity.vo
        filters = queries.ParcelFilters(
            transformation_id=tid,
            statuses=statuses,
            kind=kind,
            backend=request.backend,
            process_id=process_id,
            user_vo=user_vo,
        )
        fingerprint = filters_fingerprint(
            request.transformation_id, statuses, kind, request.backend, request.process_id, user_vo
        )
        page = await queries.list_parcels(
            self.database,
            filters,
            after=page_after(request.paging, fingerprint),
            limit=page_size(request.paging),
        )
        named = await parcel_names.handles_of(self.database, [r.parcel_id for r in page.items])
        return execution_pb2.ListParcelsResponse(
            parcels=[parcel_pb(row, named.get(row.parcel_id, "")) for row in page.items],
            next_page_token=next_page_token(page.last, fingerprint),
        )

    async def ResolveParcelName(
        self, request: execution_pb2.ResolveParcelNameRequest, context: Context
    ) -> execution_pb2.ResolveParcelNameResponse:
        seen = []
        for parcel_id in await parcel_names.candidates(self.database, request.name):
            try:
                await self._visible_parcel(parcel_id, request.name, context)
            except NotFound:
                continue
            seen.append(parcel_id)
        named = await parcel_names.handles_of(self.database, seen)
        found, handle = parcel_names.the_one(request.name, [(i, named.get(i, "")) for i in seen])
        return execution_pb2.ResolveParcelNameResponse(parcel_id=id_text(found), handle=handle)

    async def _visible_parcel(
        self, parcel_id: bytes, shown_as: str, context: Context
    ) -> queries.ParcelDetail:
        """The parcel's detail, NotFound (as `shown_as`) when the caller may not see it."""
        detail = await queries.get_parcel(self.database, parcel_id)
        parcel = detail.parcel
        if parcel.transformation_id is not None:
            await self._describe(parcel.transformation_id, context)
        elif detail.submitter is None or not self._caller().sees(detail.submitter.vo):
            raise NotFound("parcel", shown_as)
        return detail

    async def GetParcel(
        self, request: execution_pb2.GetParcelRequest, context: Context
    ) -> execution_pb2.GetParcelResponse:
        parcel_id = required_id(request.parcel_id, "parcel_id")
        detail = await self._visible_parcel(parcel_id, request.parcel_id, context)
        parcel = detail.parcel
        named = await parcel_names.handles_of(self.database, [parcel.parcel_id])
        reply = execution_pb2.GetParcelResponse(
            parcel=parcel_pb(parcel, named.get(parcel.parcel_id, "")),
            inputs=[input_pb(i) for i in detail.inputs],
            outputs=[output_pb(o) for o in detail.outputs],
            identifier=detail.identifier,
        )
        if detail.compute is not None:
            reply.compute.CopyFrom(compute_facet_pb(detail.compute))
        elif detail.data.request is not None:
            reply.data.CopyFrom(
                execution_pb2.DataFacet(
                    request_json=json_text(detail.data.request),
                    deltas=[
                        execution_pb2.StorageDelta(
                            storage_element=d.storage_element,
                            files_added=d.files_added,
                            bytes_added=d.bytes_added,
                            files_freed=d.files_freed,
                            bytes_freed=d.bytes_freed,
                        )
                        for d in detail.data.deltas
                    ],
                )
            )
        outcome = stored_outcome(parcel.annotations)
        if outcome is not None:
            reply.outcome.CopyFrom(outcome_to_proto(outcome))
        if detail.submitter is not None:
            reply.vo, reply.owner_sub = detail.submitter.vo, detail.submitter.sub
        return reply

    async def GroupFailures(
        self, request: execution_pb2.GroupFailuresRequest, context: Context
    ) -> execution_pb2.GroupFailuresResponse:
        problems = Problems()
        tids = problems.ids(request.transformation_ids, "transformation_ids")
        if not request.transformation_ids:
            problems.add("transformation_ids", "required: at least one")
        elif len(request.transformation_ids) > failure_groups.MAX_TRANSFORMATIONS:
            problems.add("transformation_ids", f"at most {failure_groups.MAX_TRANSFORMATIONS}")
        if not 0 <= request.examples <= failure_groups.MAX_EXAMPLES:
            problems.add("examples", f"from 0 to {failure_groups.MAX_EXAMPLES}")
        if not 0 <= request.buckets <= failure_groups.MAX_BUCKETS:
            problems.add("buckets", f"from 0 to {failure_groups.MAX_BUCKETS}")
        problems.raise_if_any()
        wanted = list(dict.fromkeys(tids))
        await self._describe_many(wanted, context)  # NotFound for one the caller may not see
        grouped = await failure_groups.group_failures(
            self.database,
            self.failure_folds,
            wanted,
            since=from_timestamp(request.since) if request.HasField("since") else None,
            examples=request.examples or failure_groups.DEFAULT_EXAMPLES,
            buckets=request.buckets,
        )
        named = await parcel_names.handles_of(
            self.database, [p for g in grouped.groups for p in g.examples]
        )
        reply = execution_pb2.GroupFailuresResponse(
            groups=[failure_group_pb(g, named) for g in grouped.groups],
            parcels=grouped.parcels,
            truncated=grouped.truncated,
        )
        if grouped.over_time is not None:
            reply.over_time_from.FromDatetime(grouped.over_time[0])
            reply.over_time_to.FromDatetime(grouped.over_time[1])
        return reply

    async def CountParcelsOverTime(
        self, request: execution_pb2.CountParcelsOverTimeRequest, context: Context
    ) -> execution_pb2.CountParcelsOverTimeResponse:
        problems = Problems()
        tid = problems.id(request.transformation_id, "transformation_id")
        if not 1 <= request.buckets <= parcel_times.MAX_BUCKETS:
            problems.add("buckets", f"from 1 to {parcel_times.MAX_BUCKETS}")
        problems.raise_if_any()
        assert tid is not None
        await self._describe(tid, context)  # NotFound for one the caller may not see
        found = await parcel_times.parcels_over_time(self.database, tid, request.buckets)
        reply = execution_pb2.CountParcelsOverTimeResponse(
            in_flight=found.in_flight, done=found.done, failed=found.failed
        )
        start, end = to_timestamp(found.start), to_timestamp(found.end)
        if start is not None and end is not None:
            reply.span_from.CopyFrom(start)
            reply.span_to.CopyFrom(end)
        return reply

    # -- flush ------------------------------------------------------------------------------------

    async def Flush(
        self, request: execution_pb2.FlushRequest, context: Context
    ) -> execution_pb2.FlushResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        described = await self._steered(tid, context)
        record = await commands.packable(self.snapshot, tid, status=described.status)
        remaining = time_remaining()
        result = await commands.flush(
            self.database,
            self.locks,
            self.registry,
            self._request(request.request_id),
            record,
            claim_chunk=self.settings.claim_chunk,
            batch=self.settings.pack_batch,
            policy=self.settings.policy().for_vo(record.vo),
            budget_s=(
                FLUSH_WAIT_S if remaining is None else min(FLUSH_WAIT_S, remaining - FLUSH_MARGIN_S)
            ),
        )
        return execution_pb2.FlushResponse(
            inputs_offered=result.offered,
            parcels_created=result.parcels,
            inputs_assigned=result.assigned,
            inputs_problematic=result.problematic,
            inputs_delayed=result.delayed,
            failure=result.error or "",
            failure_class=(result.error_class or "") if result.error else "",
        )

    # -- feeders ----------------------------------------------------------------------------------

    async def ResetFeeders(
        self, request: execution_pb2.ResetFeedersRequest, context: Context
    ) -> execution_pb2.ResetFeedersResponse:
        ids = [
            required_id(text, f"transformation_ids[{n}]")
            for n, text in enumerate(request.transformation_ids)
        ]
        for tid in ids:
            await self._steered(tid, context)
        reset = await reset_feeders(self.database, ids, clear_bookmarks=request.clear_bookmarks)
        return execution_pb2.ResetFeedersResponse(reset_count=reset)
