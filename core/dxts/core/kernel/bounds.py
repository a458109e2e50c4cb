"""How big a request may be: one maximum for every list, map, text and time of every RPC,
checked at the edge before the request reaches the authorisation check or any handler.

Every server runs `check_request` on each request it has parsed (the request interceptor of
`dxts.core.grpc.interceptors`); a request over a bound is INVALID_ARGUMENT naming the field
(`outcomes[3].message`) and the limit, and nothing else runs. The rules, so that a new RPC or a
new field is bounded the moment it exists:

* a repeated field or a map holds at most `MAX_ITEMS` entries;
* a string holds at most `MAX_TEXT` characters, bytes at most `MAX_TEXT` bytes; a string field
  named `…_json` (a JSON document in text) at most `MAX_JSON_TEXT`;
* a `google.protobuf.Timestamp` lies between 0001-01-01 and 9999-12-31 (what a datetime and
  both databases hold);
* `LIMITS` overrides the default of a named field (the labels a filter may name, a batch a
  component sends another, the documents of a submission).

Integers are not bounded here: where one sizes work (a page size, a log's `max_bytes`, a
lineage's depth) the service caps it to its own maximum instead of refusing it.
The limits are part of the contracts: docs/security.md lists them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.v1 import (
    backend_pb2,
    common_pb2,
    definition_pb2,
    dispatcher_pb2,
    execution_pb2,
)

MAX_ITEMS = 1000  # as many as one page (paging.MAX_PAGE_SIZE) and one IN list of a read
MAX_TEXT = 1024  # an id, a name, an LFN, a reason, a page token
MAX_JSON_TEXT = 1 << 20  # a JSON document in a string field: arguments, a status report
MAX_DOCUMENT = 4 << 20  # one file of a submitted bundle (gRPC's default message size)
MAX_LABELS = 64  # labels on a workgraph, or label filters of a listing
MAX_BUNDLE_FILES = 256  # files of one submitted bundle (the main document and its tools)
MAX_BATCH = 10_000  # parcels, identifiers or outcomes one component sends another at once
MAX_PARCEL_INPUTS = 100_000  # inputs one parcel carries (a merge's group)
MAX_MESSAGE = 16 * 1024  # what an outcome says of a failure (a tool's own stderr line)

# Timestamp seconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
MIN_SECONDS = -62_135_596_800
MAX_SECONDS = 253_402_300_799
TIMESTAMP = "google.protobuf.Timestamp"


def _field(message: type[Message], name: str) -> str:
    """A field's full name, looked up so that a misspelt or removed field fails at import."""
    return str(message.DESCRIPTOR.fields_by_name[name].full_name)


def _map_value(message: type[Message], name: str) -> str:
    """The full name of the values of a map field."""
    entry = message.DESCRIPTOR.fields_by_name[name].message_type
    assert entry is not None, f"{name} is no map field"
    return str(entry.fields_by_name["value"].full_name)


# Fields whose maximum is not their kind's default.
LIMITS: Mapping[str, int] = {
    _field(definition_pb2.SubmitWorkgraphRequest, "labels"): MAX_LABELS,
    _field(definition_pb2.SubmitJobRequest, "labels"): MAX_LABELS,
    _field(definition_pb2.ListWorkgraphsRequest, "labels"): MAX_LABELS,
    _field(common_pb2.DocumentBundle, "files"): MAX_BUNDLE_FILES,
    _map_value(common_pb2.DocumentBundle, "files"): MAX_DOCUMENT,
    # A stored process is a bundle's file compiled (an ontology in `$schemas` is megabytes).
    _field(definition_pb2.Process, "document_json"): MAX_DOCUMENT,
    _field(backend_pb2.ProcessDocument, "document_json"): MAX_DOCUMENT,
    _map_value(definition_pb2.ExtendScoutRequest, "feeder_args_json"): MAX_JSON_TEXT,
    _field(backend_pb2.SubmitRequest, "parcels"): MAX_BATCH,
    _field(backend_pb2.ParcelSubmission, "input_ids"): MAX_PARCEL_INPUTS,
    _field(backend_pb2.PollRequest, "identifiers"): MAX_BATCH,
    _field(backend_pb2.CancelRequest, "identifiers"): MAX_BATCH,
    _field(backend_pb2.CancelRequest, "parcel_ids"): MAX_BATCH,
    _field(dispatcher_pb2.ReportOutcomesRequest, "outcomes"): MAX_BATCH,
    _field(execution_pb2.RecordOutcomesRequest, "outcomes"): MAX_BATCH,
    _field(common_pb2.Outcome, "outputs"): MAX_BATCH,
    _field(common_pb2.Outcome, "message"): MAX_MESSAGE,
}


def limit_of(field: FieldDescriptor) -> int | None:
    """The most a field may hold (entries of a list or map, characters of a text); None for a
    field that is not bounded by size (a number, a single message)."""
    limit = LIMITS.get(field.full_name)
    if limit is not None:
        return limit
    if field.is_repeated:
        return MAX_ITEMS
    if field.type == FieldDescriptor.TYPE_STRING:
        return MAX_JSON_TEXT if field.name.endswith("_json") else MAX_TEXT
    if field.type == FieldDescriptor.TYPE_BYTES:
        return MAX_TEXT
    return None


def check_request(request: Message) -> None:
    """INVALID_ARGUMENT naming every field of `request` over its bound, if there is one."""
    violations = list(_violations(request, ""))
    if violations:
        raise InvalidArgument(violations)


def _violations(message: Message, path: str) -> Iterator[FieldViolation]:
    if message.DESCRIPTOR.full_name == TIMESTAMP:
        yield from _timestamp(message, path)
        return
    for field, value in message.ListFields():
        where = f"{path}{field.name}"
        limit = limit_of(field)
        if field.is_repeated:
            if limit is not None and len(value) > limit:
                yield FieldViolation(where, f"at most {limit} entries, got {len(value)}")
                continue  # its entries are not looked at: the request is refused already
            yield from _entries(field, value, where)
        elif limit is not None and len(value) > limit:
            unit = "characters" if field.type == FieldDescriptor.TYPE_STRING else "bytes"
            yield FieldViolation(where, f"at most {limit} {unit}, got {len(value)}")
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            yield from _violations(value, f"{where}.")


def _entries(field: FieldDescriptor, value: Any, where: str) -> Iterator[FieldViolation]:
    """The violations of a list's or a map's entries."""
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key_limit = limit_of(entry.fields_by_name["key"]) or MAX_TEXT
        value_field = entry.fields_by_name["value"]
        value_limit = limit_of(value_field)
        for key, item in value.items():
            if isinstance(key, str) and len(key) > key_limit:
                yield FieldViolation(where, f"a key of at most {key_limit} characters")
            elif isinstance(item, Message):
                yield from _violations(item, f"{where}[{key}].")
            elif value_limit is not None and len(item) > value_limit:
                yield FieldViolation(f"{where}[{key}]", f"at most {value_limit} characters")
        return
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        for i, item in enumerate(value):
            yield from _violations(item, f"{where}[{i}].")
    elif field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
        item_limit = MAX_JSON_TEXT if field.name.endswith("_json") else MAX_TEXT
        for i, item in enumerate(value):
            if len(item) > item_limit:
                yield FieldViolation(f"{where}[{i}]", f"at most {item_limit} characters")


def _timestamp(message: Any, path: str) -> Iterator[FieldViolation]:
    where = path.removesuffix(".")
    if not MIN_SECONDS <= message.seconds <= MAX_SECONDS or not 0 <= message.nanos < 10**9:
        yield FieldViolation(where, "a time between 0001-01-01 and 9999-12-31")
