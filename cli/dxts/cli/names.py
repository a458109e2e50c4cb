"""What the operator types for a workgraph or a member, turned into the id the services take.

A member is named by its transformation id or as `WG/Step` (the workgraph id, a slash, and the
step name `dxts show` prints). An id of the other kind (a workgraph's where a member's is
expected, or the reverse) is recognised, and the message says which it is and what to type.
"""

from __future__ import annotations

from dxts.cli.client import Clients
from dxts.core.errors import InvalidArgument, NotFound
from dxts.v1 import definition_pb2


async def member_id(clients: Clients, text: str, *, field: str = "TF") -> str:
    """The transformation id of `text`: an id, or `WG/Step`."""
    workgraph, slash, step = text.partition("/")
    if slash:
        return await _step_of(clients, workgraph, step, field=field)
    try:
        await clients.definition.GetTransformation(
            definition_pb2.GetTransformationRequest(transformation_id=text)
        )
    except (NotFound, InvalidArgument) as error:
        if await _is_workgraph(clients, text):
            raise InvalidArgument(
                f"{text} is a workgraph, not a member: name a member as {text}/STEP "
                f"(see `dxts show {text}`)",
                field=field,
            ) from None
        if isinstance(error, InvalidArgument):
            raise InvalidArgument(
                f"{text!r} is neither a transformation id nor WG/STEP", field=field
            ) from None
        raise NotFound("transformation", text) from None
    return text


async def workgraph_id(clients: Clients, text: str, *, field: str = "WG") -> str:
    """`text` if it names a workgraph; a member's id is recognised and refused by name."""
    try:
        await clients.definition.GetWorkgraph(definition_pb2.GetWorkgraphRequest(workgraph_id=text))
        return text
    except (NotFound, InvalidArgument) as error:
        refused = error
    try:
        got = await clients.definition.GetTransformation(
            definition_pb2.GetTransformationRequest(transformation_id=text)
        )
    except (NotFound, InvalidArgument):
        raise refused from None
    member = got.transformation
    owner = f"of workgraph {member.workgraph_id}" if member.workgraph_id else "(standalone)"
    raise InvalidArgument(
        f"{text} is a member ({member.step or 'transformation'}) {owner}, not a workgraph",
        field=field,
    )


async def entity(clients: Clients, text: str) -> tuple[str, str]:
    """("workgraph", id) or ("transformation", id) for an id or `WG/Step`."""
    if "/" not in text and await _is_workgraph(clients, text):
        return "workgraph", text
    return "transformation", await member_id(clients, text, field="WG|TF")


async def _is_workgraph(clients: Clients, text: str) -> bool:
    try:
        await clients.definition.GetWorkgraph(definition_pb2.GetWorkgraphRequest(workgraph_id=text))
    except (NotFound, InvalidArgument):
        return False
    return True


async def _step_of(clients: Clients, workgraph: str, step: str, *, field: str) -> str:
    try:
        got = await clients.definition.GetWorkgraph(
            definition_pb2.GetWorkgraphRequest(workgraph_id=workgraph)
        )
    except (NotFound, InvalidArgument):
        raise NotFound("workgraph", workgraph) from None
    steps = {member.step: member.transformation_id for member in got.members}
    found = steps.get(step) or {s.lower(): i for s, i in steps.items()}.get(step.lower())
    if found is None:
        raise InvalidArgument(
            f"workgraph {workgraph} has no member {step!r} (its members: "
            f"{', '.join(sorted(steps)) or 'none'})",
            field=field,
        )
    return found
