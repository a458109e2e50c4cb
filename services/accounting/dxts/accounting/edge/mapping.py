"""AccountingService's replies built from the domain results (`logic`), and the contract's
numbers for the counters and entities."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from dxts.accounting.logic.counts import StatusCounts, StorageOutlook, StorageUsage
from dxts.accounting.logic.log_listing import LogOwner, LogRecord
from dxts.core.counters import DATA_PARCELS, TRANSFORMATION, Entity
from dxts.core.grpc.convert import enum_to_proto, json_text, to_timestamp
from dxts.core.ids import id_to_str
from dxts.core.states import InputStatus, ParcelStatus, TransformationStatus, WorkgraphStatus
from dxts.v1 import accounting_pb2, common_pb2

ENTITIES = {common_pb2.ENTITY_INPUT: Entity.INPUT, common_pb2.ENTITY_PARCEL: Entity.PARCEL}
ENTITY_NUMBERS = {entity: number for number, entity in ENTITIES.items()}
COUNTERS = {
    accounting_pb2.COUNTER_TRANSFORMATION: TRANSFORMATION,
    accounting_pb2.COUNTER_DATA_PARCELS: DATA_PARCELS,
}
COUNTER_NUMBERS = {counter.name: number for number, counter in COUNTERS.items()}


def number(member: StrEnum) -> Any:
    """`enum_to_proto`, typed for the generated fields (whose ValueType is a NewType of int)."""
    return enum_to_proto(member)


def status_count(entity: Entity | None, status: str, count: int) -> common_pb2.StatusCount:
    if entity is Entity.INPUT:
        return common_pb2.StatusCount(input_status=number(InputStatus(status)), count=count)
    if entity is Entity.PARCEL:
        return common_pb2.StatusCount(parcel_status=number(ParcelStatus(status)), count=count)
    return common_pb2.StatusCount(
        transformation_status=number(TransformationStatus(status)), count=count
    )


def status_counts(entity: Entity | None, found: dict[str, int]) -> list[common_pb2.StatusCount]:
    return [status_count(entity, status, n) for status, n in found.items()]


def counts_pb(found: StatusCounts) -> accounting_pb2.TransformationCounts:
    return accounting_pb2.TransformationCounts(
        transformation_id=id_to_str(found.transformation_id),
        entity=ENTITY_NUMBERS[found.entity],
        counts=status_counts(found.entity, found.counts),
        total=found.total,
    )


def usage_pb(usage: StorageUsage) -> accounting_pb2.StorageUsage:
    tid = usage.transformation_id
    return accounting_pb2.StorageUsage(
        transformation_id=id_to_str(tid) if tid is not None else "",
        storage_element=usage.storage_element,
        status=number(usage.status),
        lfn_count_added=usage.files_added,
        lfn_size_added=usage.bytes_added,
        lfn_count_freed=usage.files_freed,
        lfn_size_freed=usage.bytes_freed,
    )


def outlook_pb(outlook: StorageOutlook) -> accounting_pb2.StorageOutlook:
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


def log_entry_pb(record: LogRecord) -> accounting_pb2.LogEntry:
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
            entry.old_workgraph_status = number(WorkgraphStatus(record.old_status))
        if record.new_status is not None:
            entry.new_workgraph_status = number(WorkgraphStatus(record.new_status))
    else:
        entry.transformation_id = owner
        if record.old_status is not None:
            entry.old_transformation_status = number(TransformationStatus(record.old_status))
        if record.new_status is not None:
            entry.new_transformation_status = number(TransformationStatus(record.new_status))
    return entry
