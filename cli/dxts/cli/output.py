"""What the commands print: rich tables for people, `--output json` for scripts.

The JSON form of a contract message is protobuf's own mapping (field names as in the .proto,
every field present), so a script reads the same names as the contract documents; status counts
are turned into `{status: count}` objects, which is how they are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC
from enum import StrEnum
from typing import Annotated, Any

import typer
from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from rich.console import Console
from rich.table import Table

from dxts.core import states
from dxts.core.errors import InvalidArgument
from dxts.core.grpc.convert import enum_from_proto, enum_to_proto
from dxts.v1 import common_pb2


class Output(StrEnum):
    TEXT = "text"
    JSON = "json"


OutputOption = Annotated[
    Output, typer.Option("--output", "-o", help="text (tables) or json (for scripts).")
]

console = Console(highlight=False)


def table(*headers: str, whole: tuple[int, ...] = (0,)) -> Table:
    """A table whose columns at the `whole` positions (ids, names) are never wrapped or cut."""
    found = Table(*headers)
    for position in whole:
        found.columns[position].no_wrap = True
    return found


def message_dict(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=False))


_STATUS_FIELDS: dict[str, type[StrEnum]] = {
    "input_status": states.InputStatus,
    "parcel_status": states.ParcelStatus,
    "transformation_status": states.TransformationStatus,
}


def name(enum: type[StrEnum], number: int) -> str:
    """A contract enum number as the core spells it ("FinalizingBlocked"); "-" for unset."""
    if number == 0:
        return "-"
    return enum_from_proto(enum, number, field=enum.__name__).value


def counts(items: Iterable[common_pb2.StatusCount]) -> dict[str, int]:
    """StatusCount lists as `{status: count}`, in machine order."""
    out: dict[str, int] = {}
    for item in items:
        which = item.WhichOneof("status")
        if which is not None:
            out[name(_STATUS_FIELDS[which], getattr(item, which))] = item.count
    return out


def compact(found: dict[str, int]) -> str:
    """The non-zero counts on one line: "Processed 6 · Assigned 2"; "-" when all are zero."""
    shown = [f"{status} {count}" for status, count in found.items() if count]
    return " · ".join(shown) or "-"


def when(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return "-"
    return stamp.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S")


def parse_enum(enum: type[StrEnum], text: str, *, field: str) -> int:
    """A status typed on the command line ("processed", "NotProcessed", "not_processed") as
    the contract's number."""
    wanted = text.replace("_", "").replace("-", "").lower()
    for member in enum:
        if member.value.lower() == wanted:
            return enum_to_proto(member)
    allowed = ", ".join(member.value for member in enum)
    raise InvalidArgument(f"{text!r} is not one of {allowed}", field=field)


def labels(pairs: list[str] | None, *, field: str = "--label") -> dict[str, str]:
    """`k=v` options as a mapping."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise InvalidArgument(f"{pair!r} is not key=value", field=field)
        out[key] = value
    return out
