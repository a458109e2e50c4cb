"""The DiracX adaptor's searches of DiracX's jobs, 500 values a search (DiracX's `in` takes a
list; a very long one makes a very long query): the jobs already carrying parcels' names (the
exactly-once check before a submission) and the statuses Poll judges."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from dxts.backends.diracx.logic import jdl
from dxts.backends.diracx.logic.service import DiracXService

T = TypeVar("T")
SEARCH_VALUES = 500
STATUS_FIELDS = ["JobID", "JobName", "Status", "MinorStatus", "ApplicationStatus", "Site"]


def chunks(items: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def jobs_named(client: DiracXService, parcel_ids: Sequence[str]) -> dict[str, int]:
    """ParcelID → the DiracX job already carrying its name (the oldest, should there be more
    than one)."""
    found: dict[str, int] = {}
    for chunk in chunks(list(parcel_ids), SEARCH_VALUES):
        names = [jdl.job_name(p) for p in chunk]
        rows = await client.search(
            [{"parameter": "JobName", "operator": "in", "values": names}], ["JobID", "JobName"]
        )
        for row in rows:
            parcel_id = jdl.parcel_of(row.get("JobName"))
            if parcel_id is not None:
                job_id = int(row["JobID"])
                found[parcel_id] = min(job_id, found.get(parcel_id, job_id))
    return found


async def statuses(client: DiracXService, job_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """JobID → its status fields (`STATUS_FIELDS`); a job DiracX does not know is absent."""
    found: dict[int, dict[str, Any]] = {}
    for chunk in chunks(list(job_ids), SEARCH_VALUES):
        rows = await client.search(
            [{"parameter": "JobID", "operator": "in", "values": list(chunk)}], STATUS_FIELDS
        )
        found.update({int(row["JobID"]): row for row in rows})
    return found
