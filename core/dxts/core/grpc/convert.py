"""Conversions between the core's values and the contracts' (common.proto's conventions).

Ids and hashes already have theirs in dxts.core.ids (id_to_str / id_from_str, hash_to_str /
hash_from_str). Here: the state enums (by name: InputStatus.NOT_PROCESSED ↔
INPUT_STATUS_NOT_PROCESSED), timestamps, and JSON text fields.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from dxts.core import states
from dxts.core.errors import InvalidArgument
from dxts.v1 import common_pb2

E = TypeVar("E", bound=StrEnum)

_PROTO_ENUMS: dict[type[StrEnum], tuple[Any, str]] = {
    states.WorkgraphStatus: (common_pb2.WorkgraphStatus, "WORKGRAPH_STATUS_"),
    states.TransformationStatus: (common_pb2.TransformationStatus, "TRANSFORMATION_STATUS_"),
    states.InputStatus: (common_pb2.InputStatus, "INPUT_STATUS_"),
    states.ParcelStatus: (common_pb2.ParcelStatus, "PARCEL_STATUS_"),
    states.Kind: (common_pb2.Kind, "KIND_"),
    states.ActionResult: (common_pb2.ActionResult, "ACTION_RESULT_"),
}


def enum_to_proto(member: StrEnum) -> int:
    """The contract's number for a core enum member."""
    wrapper, prefix = _PROTO_ENUMS[type(member)]
    return wrapper.Value(prefix + member.name)


def enum_from_proto(enum: type[E], number: int, *, field: str) -> E:
    """The core member a contract number stands for; UNSPECIFIED or unknown numbers are
    INVALID_ARGUMENT naming `field`."""
    wrapper, prefix = _PROTO_ENUMS[enum]
    try:
        name = wrapper.Name(number)
    except ValueError:
        name = ""
    member = enum.__members__.get(name.removeprefix(prefix)) if name.startswith(prefix) else None
    if member is None:
        allowed = ", ".join(prefix + m.name for m in enum)
        raise InvalidArgument(f"expected one of {allowed}, got {number}", field=field)
    return member


def to_timestamp(value: datetime | None) -> Timestamp | None:
    """A database time (naive means UTC, as stored) as a Timestamp; None stays None."""
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value if value.tzinfo else value.replace(tzinfo=UTC))
    return stamp


def from_timestamp(stamp: Timestamp) -> datetime:
    """An aware UTC datetime."""
    return stamp.ToDatetime(tzinfo=UTC)


def json_text(value: Any) -> str:
    """A `*_json` field's text; None is the empty string."""
    return "" if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def from_json_text(text: str, *, field: str) -> Any:
    """A `*_json` field's value; empty is None, malformed JSON (or JSON nested too deeply for
    the parser's recursion) is INVALID_ARGUMENT."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError as error:
        raise InvalidArgument(f"not valid JSON: {error}", field=field) from None
    except RecursionError:
        raise InvalidArgument("JSON nested too deeply to be read", field=field) from None
