"""What the operator types for a workgraph or a member, turned into the id the services take.

A member is named by its transformation id or as `WG/Step` (the workgraph id, a slash, and the
step name `dxts show` prints). An id of the other kind (a workgraph's where a member's is
expected, or the reverse) is recognised, and the message says which it is and what to type.

Any id may be shortened, as git's commit ids are, to a prefix of at least MIN_PREFIX characters
that only it starts with among the workgraphs and members the caller can see; a prefix more
than one starts with is refused, naming them.
"""

from __future__ import annotations

import re

from dxts.cli.client import Clients
from dxts.core.errors import InvalidArgument, NotFound
from dxts.v1 import definition_pb2

MIN_PREFIX = 4
FULL_ID_LENGTH = 36
# Candidates named when a prefix is ambiguous.
SHOWN_CANDIDATES = 5
PAGE_SIZE = 500
_PREFIX = re.compile(r"[0-9a-f-]+")


async def member_id(clients: Clients, text: str, *, field: str = "TF") -> str:
    """The transformation id of `text`: an id (or its prefix), or `WG/Step`."""
    workgraph, slash, step = text.partition("/")
    if slash:
        return await _step_of(
            clients, await expand(clients, workgraph, field=field), step, field=field
        )
    text = await expand(clients, text, field=field)
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
    """`text` (or the id it is a prefix of) if it names a workgraph; a member's id is recognised
    and refused by name."""
    text = await expand(clients, text, field=field)
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
    """("workgraph", id) or ("transformation", id) for an id (or its prefix) or `WG/Step`."""
    if "/" not in text:
        text = await expand(clients, text, field="WG|TF")
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


async def expand(clients: Clients, text: str, *, field: str) -> str:
    """The workgraph or member id `text` is a unique prefix of; `text` itself when it is a
    whole id or cannot be a prefix (the caller's lookup then says what is wrong with it)."""
    prefix = text.lower()
    if len(text) >= FULL_ID_LENGTH or not _PREFIX.fullmatch(prefix):
        return text
    if len(prefix) < MIN_PREFIX:
        raise InvalidArgument(
            f"{text!r} is too short to name anything: give at least {MIN_PREFIX} characters "
            "of an id",
            field=field,
        )
    found = [(kind, full) for kind, full in await _visible_ids(clients) if full.startswith(prefix)]
    if not found:
        raise NotFound("workgraph or member id starting with", text)
    if len(found) > 1:
        named = ", ".join(f"{kind} {full}" for kind, full in found[:SHOWN_CANDIDATES])
        more = f" and {len(found) - SHOWN_CANDIDATES} more" if len(found) > SHOWN_CANDIDATES else ""
        raise InvalidArgument(
            f"{text!r} is ambiguous: {len(found)} ids start with it ({named}{more}); "
            "give more characters",
            field=field,
        )
    return found[0][1]


async def _visible_ids(clients: Clients) -> list[tuple[str, str]]:
    """Every workgraph and member id the caller can see, each with its kind."""
    ids: list[tuple[str, str]] = []
    workgraphs = definition_pb2.ListWorkgraphsRequest()
    workgraphs.paging.page_size = PAGE_SIZE
    while True:
        page = await clients.definition.ListWorkgraphs(workgraphs)
        ids += [("workgraph", w.workgraph_id) for w in page.workgraphs]
        if not page.next_page_token:
            break
        workgraphs.paging.page_token = page.next_page_token
    members = definition_pb2.ListTransformationsRequest()
    members.paging.page_size = PAGE_SIZE
    while True:
        listed = await clients.definition.ListTransformations(members)
        ids += [("transformation", t.transformation_id) for t in listed.transformations]
        if not listed.next_page_token:
            break
        members.paging.page_token = listed.next_page_token
    return ids
