"""A file's lineage: upstream, which parcel of which member produced it, from which inputs, and
so on (ExecutionService.Provenance); downstream, which members took it in, in which parcels,
and what those made, and so on (ExecutionService.ListDescendants, its first page). A file known in
neither direction is not found. Parcels are named by their handles (as the services give them)
and members by theirs ("wg-3/Reconstruction"), asked of definition in one call for the members
the page names (ListActiveTransformations by id: the caller's VO, whatever their status)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from dxts.core.errors import NotFound
from dxts.v1 import common_pb2, definition_pb2, execution_pb2
from dxts.web import names
from dxts.web.services import UserClients

DESCENDANTS_SHOWN = 200


@dataclass
class Step:
    lfn: str
    output_name: str
    parcel_id: str
    parcel_handle: str
    parcel_status: str
    transformation_id: str
    process_id: str
    inputs: list[tuple[str, str]]  # (lfn or descriptor, status)
    member: str = ""  # the member's handle, else its id


@dataclass
class Made:
    """One input downstream that took a descendant in, and what its parcel made."""

    depth: int
    lfn: str
    input_status: str
    transformation_id: str
    parcel_id: str  # "" while not packed
    parcel_handle: str
    parcel_status: str
    outputs: list[str]
    member: str = ""  # the member's handle, else its id


@dataclass
class Lineage:
    steps: list[Step]
    made: list[Made]
    more: bool  # more descendants than shown


async def lineage(clients: UserClients, lfn: str) -> Lineage:
    """Both directions; NotFound when the file is known in neither."""
    upstream, downstream = await asyncio.gather(
        _absent_as_none(clients.execution.Provenance(execution_pb2.ProvenanceRequest(lfn=lfn))),
        _absent_as_none(
            clients.execution.ListDescendants(
                execution_pb2.ListDescendantsRequest(
                    lfn=lfn, paging=common_pb2.Paging(page_size=DESCENDANTS_SHOWN)
                )
            )
        ),
    )
    if upstream is None and downstream is None:
        raise NotFound("file", lfn)
    steps = [_step(r) for r in upstream.records] if upstream is not None else []
    made = [_made(r) for r in downstream.records] if downstream is not None else []
    named = await member_handles(
        clients, [*(s.transformation_id for s in steps), *(m.transformation_id for m in made)]
    )
    for step in steps:
        step.member = named.get(step.transformation_id) or step.transformation_id
    for one in made:
        one.member = named.get(one.transformation_id) or one.transformation_id
    more = downstream is not None and bool(downstream.next_page_token or downstream.truncated)
    return Lineage(steps, made, more)


async def member_handles(clients: UserClients, ids: list[str]) -> dict[str, str]:
    """Each member's handle by id, in one call (those the user may not see are left out)."""
    wanted = list(dict.fromkeys(t for t in ids if t))
    if not wanted:
        return {}
    reply = await clients.definition.ListActiveTransformations(
        definition_pb2.ListActiveTransformationsRequest(
            transformation_ids=wanted, paging=common_pb2.Paging(page_size=len(wanted))
        )
    )
    return {t.transformation_id: t.handle for t in reply.transformations}


async def _absent_as_none(call: Any) -> Any:
    try:
        return await call
    except NotFound:
        return None


def _step(r: execution_pb2.ProvenanceRecord) -> Step:
    return Step(
        lfn=r.output.lfn,
        output_name=r.output.output_name,
        parcel_id=r.parcel.parcel_id,
        parcel_handle=r.parcel.handle or r.parcel.parcel_id,
        parcel_status=names.named_parcel_status(r.parcel.status),
        transformation_id=r.parcel.transformation_id,
        process_id=r.process_id,
        inputs=[(i.lfn or i.descriptor_json, names.named_input_status(i.status)) for i in r.inputs],
    )


def _made(r: execution_pb2.DescendantRecord) -> Made:
    packed = r.HasField("parcel")
    return Made(
        depth=r.depth,
        lfn=r.input.lfn,
        input_status=names.named_input_status(r.input.status),
        transformation_id=r.input.transformation_id,
        parcel_id=r.parcel.parcel_id if packed else "",
        parcel_handle=(r.parcel.handle or r.parcel.parcel_id) if packed else "",
        parcel_status=names.named_parcel_status(r.parcel.status) if packed else "",
        outputs=[o.lfn for o in r.outputs],
    )
