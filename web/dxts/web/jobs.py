"""The user jobs page: the user parcels of the user's VO (ListParcels without a member, which
for a person answers the user parcels of their VO), a page of JOBS_PAGE at a time in creation
order, each with its owner (GetParcel, one per parcel shown, concurrently) and how it ended.
Each links to the same parcel page as a production's parcels."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

from dxts.v1 import common_pb2, execution_pb2
from dxts.web import names
from dxts.web.members import parcel_statuses
from dxts.web.parcels import failure_text
from dxts.web.services import UserClients

JOBS_PAGE = 100
JOB_STATUSES = [names.named_parcel_status(n) for n in common_pb2.ParcelStatus.values() if n]


@dataclass
class JobRow:
    parcel: execution_pb2.Parcel
    status: str
    owner: str
    vo: str
    failure: str

    @property
    def created(self) -> datetime | None:
        return names.created_at(self.parcel.parcel_id)


async def jobs_page(clients: UserClients, status: str, page_token: str) -> tuple[list[JobRow], str]:
    """One page of the user jobs (in `status`, when one is named) and the next page's token."""
    request = execution_pb2.ListParcelsRequest(
        paging=common_pb2.Paging(page_size=JOBS_PAGE, page_token=page_token),
        statuses=parcel_statuses(status) if status in JOB_STATUSES else [],
    )
    execution = clients.execution
    listed = await execution.ListParcels(request)
    details = await asyncio.gather(
        *(
            execution.GetParcel(execution_pb2.GetParcelRequest(parcel_id=p.parcel_id))
            for p in listed.parcels
        )
    )
    rows = [
        JobRow(
            parcel=p,
            status=names.named_parcel_status(p.status),
            owner=got.owner_sub,
            vo=got.vo,
            failure=failure_text(got.outcome) if got.HasField("outcome") else "",
        )
        for p, got in zip(listed.parcels, details, strict=True)
    ]
    return rows, listed.next_page_token
