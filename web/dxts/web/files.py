"""A file's provenance: which parcel of which member produced it, from which inputs, and so
on upstream (ExecutionService.Provenance). The contracts offer no downstream query (what was
made from a file), so the page shows upstream only."""

from __future__ import annotations

from dataclasses import dataclass

from dxts.v1 import execution_pb2
from dxts.web import names
from dxts.web.services import UserClients


@dataclass
class Step:
    lfn: str
    output_name: str
    parcel_id: str
    parcel_status: str
    transformation_id: str
    process_id: str
    inputs: list[tuple[str, str]]  # (lfn or descriptor, status)


async def provenance(clients: UserClients, lfn: str) -> list[Step]:
    reply = await clients.execution.Provenance(execution_pb2.ProvenanceRequest(lfn=lfn))
    return [
        Step(
            lfn=r.output.lfn,
            output_name=r.output.output_name,
            parcel_id=r.parcel.parcel_id,
            parcel_status=names.named_parcel_status(r.parcel.status),
            transformation_id=r.parcel.transformation_id,
            process_id=r.process_id,
            inputs=[
                (i.lfn or i.descriptor_json, names.named_input_status(i.status)) for i in r.inputs
            ],
        )
        for r in reply.records
    ]
