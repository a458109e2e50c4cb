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
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
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


if TYPE_CHECKING:
    console: Console


def __getattr__(name: str) -> Any:
    """`console`, rich's Console, made when first imported or used: the commands that print
    plain lines (`dxts list`) never import rich.console (most of a hundred modules)."""
    if name == "console":
        from rich.console import Console

        made = globals()["console"] = Console(highlight=False)
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def terminal_width() -> int:
    """The terminal's width (COLUMNS when set; 80 when not a terminal), as rich would take it."""
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


def table(*headers: str, whole: tuple[int, ...] = (0,)) -> Table:
    """A table whose columns at the `whole` positions (ids, names) are never wrapped or cut."""
    from rich.table import Table

    found = Table(*headers)
    for position in whole:
        found.columns[position].no_wrap = True
    return found


def message_dict(message: Message) -> dict[str, Any]:
    """A contract message as plain nested JSON: protobuf's mapping (field names as in the
    .proto, every field present), with each `x_json` text field as the value `x` it holds and
    each state enum as the core spells it ("Completed", not "WORKGRAPH_STATUS_COMPLETED")."""
    from google.protobuf import json_format  # for --output json only

    found = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return dict(_plain(found))


_CONTRACT_ENUMS: tuple[tuple[type[StrEnum], str], ...] = (
    (states.WorkgraphStatus, "WORKGRAPH_STATUS_"),
    (states.TransformationStatus, "TRANSFORMATION_STATUS_"),
    (states.InputStatus, "INPUT_STATUS_"),
    (states.ParcelStatus, "PARCEL_STATUS_"),
    (states.Kind, "KIND_"),
    (states.ActionResult, "ACTION_RESULT_"),
)
# The contract's spelling of every state ("WORKGRAPH_STATUS_COMPLETED") → the core's (None for
# unset).
_STATE_NAMES: dict[str, str | None] = {
    **{prefix + member.name: member.value for enum, prefix in _CONTRACT_ENUMS for member in enum},
    **{f"{prefix}UNSPECIFIED": None for _, prefix in _CONTRACT_ENUMS},
}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key.endswith("_json") and isinstance(item, str):
                out[key.removesuffix("_json")] = _parsed(item)
            elif key.endswith("_json") and isinstance(item, dict):  # a map of JSON texts
                out[key.removesuffix("_json")] = {k: _parsed(v) for k, v in item.items()}
            else:
                out[key] = _plain(item)
        return out
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, str) and value in _STATE_NAMES:
        return _STATE_NAMES[value]
    return value


def _parsed(text: Any) -> Any:
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


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
