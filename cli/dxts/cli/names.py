"""What the operator types for a workgraph, a member, a parcel or an action, turned into the id
the services take.

Names are resolved by the service that holds the rows (definition's ResolveName, execution's
ResolveParcelName), in one call, within the caller's VO: a handle (`wg-42`, `wg-42/Reco`, `t-7`,
`p-10293`), a full id, a prefix of an id's hex digits, or `WG/STEP` with WG any of the
workgraph's names. An unknown name gets one line saying so, an ambiguous prefix one line naming
the candidates, and a name of the other kind (a workgraph's where a member's is expected, or the
reverse) one line saying which it is and what to type. An action is named by its number, with
or without the `#` it is printed with (bash takes an unquoted `#27` for a comment).
"""

from __future__ import annotations

from dxts.cli.client import Clients
from dxts.core.errors import InvalidArgument
from dxts.v1 import definition_pb2


async def resolve(clients: Clients, text: str, *, field: str) -> definition_pb2.ResolveNameResponse:
    """What `text` names among workgraphs and members (kind, id, handle)."""
    try:
        return await clients.definition.ResolveName(definition_pb2.ResolveNameRequest(name=text))
    except InvalidArgument as error:
        raise InvalidArgument(error.violations[0].description, field=field) from None


async def member_id(clients: Clients, text: str, *, field: str = "TF") -> str:
    """The transformation id of a member's name."""
    found = await resolve(clients, text, field=field)
    if found.kind == "workgraph":
        raise InvalidArgument(
            f"{text} is a workgraph, not a member: name a member as {found.handle}/STEP "
            f"(see `dxts show {found.handle}`)",
            field=field,
        )
    return found.id


async def workgraph_id(clients: Clients, text: str, *, field: str = "WG") -> str:
    """The workgraph id of a workgraph's name; a member's name is recognised and refused."""
    found = await resolve(clients, text, field=field)
    if found.kind != "workgraph":
        owner = found.handle.partition("/")[0] if found.workgraph_id else "no workgraph"
        raise InvalidArgument(
            f"{text} is a member ({found.handle}) of {owner}, not a workgraph", field=field
        )
    return found.id


async def entity(clients: Clients, text: str) -> tuple[str, str]:
    """("workgraph", id) or ("transformation", id) for a workgraph's or a member's name."""
    found = await resolve(clients, text, field="WG|TF")
    return found.kind, found.id


async def parcel_id(clients: Clients, text: str, *, field: str = "PARCEL") -> str:
    """The parcel id of a parcel's name (p-10293, its id, or a prefix of it)."""
    from dxts.v1 import execution_pb2  # the parcel verbs only

    try:
        found = await clients.execution.ResolveParcelName(
            execution_pb2.ResolveParcelNameRequest(name=text)
        )
    except InvalidArgument as error:
        raise InvalidArgument(error.violations[0].description, field=field) from None
    return found.parcel_id


def action_number(text: str, *, field: str = "ACTION") -> int:
    """An action's number as typed: `27`, or `#27` (quoted) as it is printed."""
    digits = text.strip().removeprefix("#")
    if not digits.isdigit():
        raise InvalidArgument(
            f"{text!r} is not an action number: give the number `dxts show WG` prints (27 or "
            "'#27')",
            field=field,
        )
    return int(digits)
