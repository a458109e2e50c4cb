"""AccountingService: requests to domain calls and results to replies, nothing else.

Every malformed field is reported at once (INVALID_ARGUMENT with one field violation per
problem); domain errors raised below become status codes in the one interceptor.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import grpc

from dxts.accounting import counts, log_listing, repair
from dxts.accounting.counts import StatusCounts, StorageOutlook, StorageUsage
from dxts.accounting.log_listing import LogOwner, LogRecord
from dxts.accounting.members import MemberLister
from dxts.core.counters import DATA_PARCELS, TRANSFORMATION, Counter, Entity
from dxts.core.db import Database
from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.grpc import current_identity
from dxts.core.grpc.auth import bearer_token
from dxts.core.grpc.convert import enum_to_proto, from_timestamp, json_text, to_timestamp
from dxts.core.grpc.paging import (
    decode_page_token,
    encode_page_token,
    filters_fingerprint,
    page_size,
)
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.states import InputStatus, ParcelStatus, TransformationStatus, WorkgraphStatus
from dxts.v1 import accounting_pb2, accounting_pb2_grpc, common_pb2

Context = grpc.aio.ServicerContext[Any, Any]

ENTITIES = {common_pb2.ENTITY_INPUT: Entity.INPUT, common_pb2.ENTITY_PARCEL: Entity.PARCEL}
ENTITY_NUMBERS = {entity: number for number, entity in ENTITIES.items()}
COUNTERS = {
    accounting_pb2.COUNTER_TRANSFORMATION: TRANSFORMATION,
    accounting_pb2.COUNTER_DATA_PARCELS: DATA_PARCELS,
}
COUNTER_NUMBERS = {counter.name: number for number, counter in COUNTERS.items()}


def _id(text: str, field: str, problems: list[FieldViolation]) -> bytes:
    """`text` as an id; a problem (and empty bytes) if it is not a canonical UUID."""
    try:
        return id_from_str(text, field=field)
    except InvalidArgument as error:
        problems.extend(error.violations)
        return b""


def _ids(texts: Sequence[str], field: str, problems: list[FieldViolation]) -> list[bytes]:
    return [_id(text, f"{field}[{i}]", problems) for i, text in enumerate(texts)]


def _required_id(text: str, field: str, problems: list[FieldViolation]) -> bytes:
    if not text:
        problems.append(FieldViolation(field, "required"))
        return b""
    return _id(text, field, problems)


def _number(member: StrEnum) -> Any:
    """`enum_to_proto`, typed for the generated fields (whose ValueType is a NewType of int)."""
    return enum_to_proto(member)


def _raise_if(problems: list[FieldViolation]) -> None:
    if problems:
        raise InvalidArgument(problems)


def _status_count(entity: Entity | None, status: str, count: int) -> common_pb2.StatusCount:
    if entity is Entity.INPUT:
        return common_pb2.StatusCount(input_status=_number(InputStatus(status)), count=count)
    if entity is Entity.PARCEL:
        return common_pb2.StatusCount(parcel_status=_number(ParcelStatus(status)), count=count)
    return common_pb2.StatusCount(
        transformation_status=_number(TransformationStatus(status)), count=count
    )


def _status_counts(entity: Entity | None, found: dict[str, int]) -> list[common_pb2.StatusCount]:
    return [_status_count(entity, status, n) for status, n in found.items()]


def _counts_pb(found: StatusCounts) -> accounting_pb2.TransformationCounts:
    return accounting_pb2.TransformationCounts(
        transformation_id=id_to_str(found.transformation_id),
        entity=ENTITY_NUMBERS[found.entity],
        counts=_status_counts(found.entity, found.counts),
        total=found.total,
    )


def _usage_pb(usage: StorageUsage) -> accounting_pb2.StorageUsage:
    tid = usage.transformation_id
    return accounting_pb2.StorageUsage(
        transformation_id=id_to_str(tid) if tid is not None else "",
        storage_element=usage.storage_element,
        status=_number(usage.status),
        lfn_count_added=usage.files_added,
        lfn_size_added=usage.bytes_added,
        lfn_count_freed=usage.files_freed,
        lfn_size_freed=usage.bytes_freed,
    )


def _outlook_pb(outlook: StorageOutlook) -> accounting_pb2.StorageOutlook:
    tid = outlook.transformation_id
    return accounting_pb2.StorageOutlook(
        transformation_id=id_to_str(tid) if tid is not None else "",
        storage_element=outlook.storage_element,
        lfn_count_to_write=outlook.files_to_write,
        lfn_size_to_write=outlook.bytes_to_write,
        lfn_count_to_free=outlook.files_to_free,
        lfn_size_to_free=outlook.bytes_to_free,
        lfn_count_net=outlook.net_files,
        lfn_size_net=outlook.net_bytes,
    )


def _log_entry_pb(record: LogRecord) -> accounting_pb2.LogEntry:
    entry = accounting_pb2.LogEntry(
        log_id=record.log_id,
        event_type=record.event_type,
        author=record.author,
        message=record.message or "",
        data_json=json_text(record.data),
        created_at=to_timestamp(record.created_at),
    )
    owner = id_to_str(record.owner_id)
    if record.owner is LogOwner.WORKGRAPH:
        entry.workgraph_id = owner
        if record.old_status is not None:
            entry.old_workgraph_status = _number(WorkgraphStatus(record.old_status))
        if record.new_status is not None:
            entry.new_workgraph_status = _number(WorkgraphStatus(record.new_status))
    else:
        entry.transformation_id = owner
        if record.old_status is not None:
            entry.old_transformation_status = _number(TransformationStatus(record.old_status))
        if record.new_status is not None:
            entry.new_transformation_status = _number(TransformationStatus(record.new_status))
    return entry


class AccountingServicer(accounting_pb2_grpc.AccountingServiceServicer):
    def __init__(self, database: Database, members: MemberLister) -> None:
        self.database = database
        self.members = members

    async def GetCounts(
        self, request: accounting_pb2.GetCountsRequest, context: Context
    ) -> accounting_pb2.GetCountsResponse:
        problems: list[FieldViolation] = []
        ids = _ids(request.transformation_ids, "transformation_ids", problems)
        entity = ENTITIES.get(request.entity)
        if entity is None:
            problems.append(FieldViolation("entity", "expected ENTITY_INPUT or ENTITY_PARCEL"))
            raise InvalidArgument(problems)
        _raise_if(problems)
        found = await counts.get_counts(self.database, ids, entity)
        return accounting_pb2.GetCountsResponse(counts=[_counts_pb(c) for c in found])

    async def GetWorkgraphSummary(
        self, request: accounting_pb2.GetWorkgraphSummaryRequest, context: Context
    ) -> accounting_pb2.GetWorkgraphSummaryResponse:
        problems: list[FieldViolation] = []
        workgraph_id = _required_id(request.workgraph_id, "workgraph_id", problems)
        _raise_if(problems)
        summary = await counts.workgraph_summary(
            self.database,
            self.members,
            workgraph_id,
            token=bearer_token(context.invocation_metadata()),
        )
        return accounting_pb2.GetWorkgraphSummaryResponse(
            workgraph_id=id_to_str(summary.workgraph_id),
            status=_number(summary.status),
            members=[
                accounting_pb2.MemberSummary(
                    transformation_id=id_to_str(m.member.transformation_id),
                    step=m.member.step,
                    kind=_number(m.member.kind),
                    status=_number(m.member.status),
                    input_counts=_status_counts(Entity.INPUT, m.inputs.counts),
                    parcel_counts=_status_counts(Entity.PARCEL, m.parcels.counts),
                )
                for m in summary.members
            ],
            member_counts=_status_counts(None, summary.member_counts),
            input_totals=_status_counts(Entity.INPUT, summary.totals(Entity.INPUT)),
            parcel_totals=_status_counts(Entity.PARCEL, summary.totals(Entity.PARCEL)),
        )

    async def GetStorageSummary(
        self, request: accounting_pb2.GetStorageSummaryRequest, context: Context
    ) -> accounting_pb2.GetStorageSummaryResponse:
        problems: list[FieldViolation] = []
        ids = _ids(request.transformation_ids, "transformation_ids", problems)
        problems.extend(counts.storage_element_problems(request.storage_elements))
        _raise_if(problems)
        summary = await counts.storage_summary(self.database, ids, list(request.storage_elements))
        return accounting_pb2.GetStorageSummaryResponse(
            usage=[_usage_pb(u) for u in summary.usage],
            totals=[_usage_pb(u) for u in summary.totals],
            outlook=[_outlook_pb(o) for o in summary.outlook],
            outlook_totals=[_outlook_pb(o) for o in summary.outlook_totals],
        )

    async def ListLog(
        self, request: accounting_pb2.ListLogRequest, context: Context
    ) -> accounting_pb2.ListLogResponse:
        problems: list[FieldViolation] = []
        which = request.WhichOneof("owner")
        if which is None:
            problems.append(FieldViolation("owner", "set workgraph_id or transformation_id"))
            owner, owner_text = LogOwner.WORKGRAPH, ""
        else:
            owner = LogOwner.WORKGRAPH if which == "workgraph_id" else LogOwner.TRANSFORMATION
            owner_text = getattr(request, which)
        owner_id = _required_id(owner_text, which or "owner", problems) if which else b""
        limit = 0
        try:
            limit = page_size(request.paging)
        except InvalidArgument as error:
            problems.extend(error.violations)
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
            problems.extend(error.violations)
        _raise_if(problems)
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
            entries=[_log_entry_pb(record) for record in page.records],
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
        problems: list[FieldViolation] = []
        chosen: list[Counter] = []
        for i, number in enumerate(request.counters):
            counter = COUNTERS.get(number)
            if counter is None:
                problems.append(
                    FieldViolation(
                        f"counters[{i}]", "expected COUNTER_TRANSFORMATION or COUNTER_DATA_PARCELS"
                    )
                )
            elif counter not in chosen:
                chosen.append(counter)
        ids = _ids(request.transformation_ids, "transformation_ids", problems)
        if bool(request.transformation_ids) == request.all_transformations:
            problems.append(
                FieldViolation(
                    "transformation_ids",
                    "give either transformation_ids or all_transformations (exactly one)",
                )
            )
        _raise_if(problems)
        corrections = await repair.rebuild_on_request(
            self.database,
            current_identity(),
            chosen or list(repair.COUNTERS),
            None if request.all_transformations else ids,
            request_id=request.request_id,
        )
        return accounting_pb2.RebuildResponse(
            corrections=[
                accounting_pb2.RebuildCorrection(
                    counter=COUNTER_NUMBERS[c.counter.name],
                    transformation_id=id_to_str(c.transformation_id),
                    key_and_delta_json=json_text(c.key_and_deltas()),
                )
                for c in corrections
            ]
        )
