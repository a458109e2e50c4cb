"""AccountingService: requests to domain calls and results to replies, nothing else.

Every malformed field is reported at once (INVALID_ARGUMENT with one field violation per
problem); domain errors raised below become status codes in the one interceptor.
"""

from __future__ import annotations

from typing import Any

import grpc

from dxts.accounting.edge import mapping
from dxts.accounting.logic import counts, log_listing, repair
from dxts.accounting.logic.log_listing import LogOwner
from dxts.accounting.logic.members import MemberLister
from dxts.accounting.logic.visibility import check_readable, readable_scope
from dxts.core.counters import Counter, Entity
from dxts.core.db import Database
from dxts.core.errors import InvalidArgument
from dxts.core.grpc.auth import bearer_token
from dxts.core.grpc.convert import from_timestamp, json_text
from dxts.core.grpc.paging import (
    decode_page_token,
    encode_page_token,
    filters_fingerprint,
    page_size,
)
from dxts.core.grpc.requests import Problems, required_id
from dxts.core.identity import Identity, current_identity
from dxts.core.ids import id_to_str
from dxts.v1 import accounting_pb2, accounting_pb2_grpc

Context = grpc.aio.ServicerContext[Any, Any]


class AccountingServicer(accounting_pb2_grpc.AccountingServiceServicer):
    def __init__(self, database: Database, members: MemberLister) -> None:
        self.database = database
        self.members = members

    @staticmethod
    def _caller(context: Context) -> tuple[Identity, str | None]:
        """Who calls, and the token to ask the definition service what they may see with."""
        return current_identity(), bearer_token(context.invocation_metadata())

    async def GetCounts(
        self, request: accounting_pb2.GetCountsRequest, context: Context
    ) -> accounting_pb2.GetCountsResponse:
        problems = Problems()
        ids = problems.ids(request.transformation_ids, "transformation_ids")
        entity = mapping.ENTITIES.get(request.entity)
        if entity is None:
            problems.add("entity", "expected ENTITY_INPUT or ENTITY_PARCEL")
        problems.raise_if_any()
        assert entity is not None
        await check_readable(self.members, *self._caller(context), transformation_ids=ids)
        found = await counts.get_counts(self.database, ids, entity)
        return accounting_pb2.GetCountsResponse(counts=[mapping.counts_pb(c) for c in found])

    async def GetWorkgraphSummary(
        self, request: accounting_pb2.GetWorkgraphSummaryRequest, context: Context
    ) -> accounting_pb2.GetWorkgraphSummaryResponse:
        workgraph_id = required_id(request.workgraph_id, "workgraph_id")
        summary = await counts.workgraph_summary(
            self.database,
            self.members,
            workgraph_id,
            token=bearer_token(context.invocation_metadata()),
        )
        return accounting_pb2.GetWorkgraphSummaryResponse(
            workgraph_id=id_to_str(summary.workgraph_id),
            status=mapping.number(summary.status),
            members=[
                accounting_pb2.MemberSummary(
                    transformation_id=id_to_str(m.member.transformation_id),
                    step=m.member.step,
                    kind=mapping.number(m.member.kind),
                    status=mapping.number(m.member.status),
                    input_counts=mapping.status_counts(Entity.INPUT, m.inputs.counts),
                    parcel_counts=mapping.status_counts(Entity.PARCEL, m.parcels.counts),
                )
                for m in summary.members
            ],
            member_counts=mapping.status_counts(None, summary.member_counts),
            input_totals=mapping.status_counts(Entity.INPUT, summary.totals(Entity.INPUT)),
            parcel_totals=mapping.status_counts(Entity.PARCEL, summary.totals(Entity.PARCEL)),
        )

    async def GetStorageSummary(
        self, request: accounting_pb2.GetStorageSummaryRequest, context: Context
    ) -> accounting_pb2.GetStorageSummaryResponse:
        problems = Problems()
        ids = problems.ids(request.transformation_ids, "transformation_ids")
        problems.violations.extend(counts.storage_element_problems(request.storage_elements))
        problems.raise_if_any()
        counts.check_count(ids, "transformation_ids")
        scope = await readable_scope(self.members, *self._caller(context), ids)
        summary = await counts.storage_summary(self.database, scope, list(request.storage_elements))
        return accounting_pb2.GetStorageSummaryResponse(
            usage=[mapping.usage_pb(u) for u in summary.usage],
            totals=[mapping.usage_pb(u) for u in summary.totals],
            outlook=[mapping.outlook_pb(o) for o in summary.outlook],
            outlook_totals=[mapping.outlook_pb(o) for o in summary.outlook_totals],
        )

    async def ListLog(
        self, request: accounting_pb2.ListLogRequest, context: Context
    ) -> accounting_pb2.ListLogResponse:
        problems = Problems()
        which = request.WhichOneof("owner")
        if which is None:
            problems.add("owner", "set workgraph_id or transformation_id")
            owner, owner_text = LogOwner.WORKGRAPH, ""
        else:
            owner = LogOwner.WORKGRAPH if which == "workgraph_id" else LogOwner.TRANSFORMATION
            owner_text = getattr(request, which)
        owner_id = problems.id(owner_text, which) if which else None
        limit = 0
        try:
            limit = page_size(request.paging)
        except InvalidArgument as error:
            problems.violations.extend(error.violations)
        since = (
            from_timestamp(request.since).replace(tzinfo=None)
            if request.HasField("since")
            else None
        )
        fingerprint = filters_fingerprint(
            owner.value, owner_text, since.isoformat() if since else None, request.newest_first
        )
        after = None
        try:
            position = decode_page_token(request.paging, filters=fingerprint)
            if position is not None:
                after = log_listing.position_from_token(position, field="paging.page_token")
        except InvalidArgument as error:
            problems.violations.extend(error.violations)
        problems.raise_if_any()
        assert owner_id is not None  # which is set and parsed, or a problem was raised
        await check_readable(
            self.members,
            *self._caller(context),
            workgraph_id=owner_id if owner is LogOwner.WORKGRAPH else None,
            transformation_ids=[owner_id] if owner is LogOwner.TRANSFORMATION else (),
        )
        page = await log_listing.list_log(
            self.database,
            owner,
            owner_id,
            limit=limit,
            since=since,
            newest_first=request.newest_first,
            after=after,
        )
        return accounting_pb2.ListLogResponse(
            entries=[mapping.log_entry_pb(record) for record in page.records],
            next_page_token=(
                encode_page_token(
                    log_listing.position_to_token(page.next_position), filters=fingerprint
                )
                if page.next_position is not None
                else ""
            ),
        )

    async def Rebuild(
        self, request: accounting_pb2.RebuildRequest, context: Context
    ) -> accounting_pb2.RebuildResponse:
        problems = Problems()
        chosen: list[Counter] = []
        for i, number in enumerate(request.counters):
            counter = mapping.COUNTERS.get(number)
            if counter is None:
                problems.add(
                    f"counters[{i}]", "expected COUNTER_TRANSFORMATION or COUNTER_DATA_PARCELS"
                )
            elif counter not in chosen:
                chosen.append(counter)
        ids = problems.ids(request.transformation_ids, "transformation_ids")
        if bool(request.transformation_ids) == request.all_transformations:
            problems.add(
                "transformation_ids",
                "give either transformation_ids or all_transformations (exactly one)",
            )
        problems.raise_if_any()
        identity, token = self._caller(context)
        corrections = await repair.rebuild_on_request(
            self.database,
            self.members,
            identity,
            chosen or list(repair.COUNTERS),
            None if request.all_transformations else ids,
            token=token,
            request_id=request.request_id,
        )
        return accounting_pb2.RebuildResponse(
            corrections=[
                accounting_pb2.RebuildCorrection(
                    counter=mapping.COUNTER_NUMBERS[c.counter.name],
                    transformation_id=id_to_str(c.transformation_id),
                    key_and_delta_json=json_text(c.key_and_deltas()),
                )
                for c in corrections
            ]
        )
