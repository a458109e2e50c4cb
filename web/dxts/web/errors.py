"""The errors page: failures across every member the user may see, grouped as `dxts errors`
groups them — one ExecutionService.GroupFailures call per 500 members (the contract's bound),
so the rows, counts and messages are the CLI's: same class, backend, site and normalised
message in one row, the largest first, with when it was first and last seen, the latest
failure's own words, example parcels (linked to their page) and the members and inputs hit.

Which members: every transformation of the user's VO (ListTransformations, as the CLI with no
argument), or one workgraph's (`?wg=`); which failures: all, or only the recent ones
(`?since=1h`, the CLI's `--since`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dxts.core.adaptor.mapping import failure_class_from_proto
from dxts.v1 import definition_pb2, execution_pb2
from dxts.web import names
from dxts.web.services import UserClients

IDS_PER_CALL = 500  # GroupFailures' bound on transformations per request
EXAMPLES = 5
SPANS = 24  # each group's failures over time: this many equal spans (GroupFailures' buckets)
WINDOWS = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
}


@dataclass(frozen=True)
class MemberName:
    transformation_id: str
    step: str
    workgraph_id: str
    handle: str = ""  # "wg-42/Reco" for a workgraph's member, else "t-7"

    @property
    def workgraph_handle(self) -> str:
        """Its workgraph's handle ("wg-42"), else a short id."""
        prefix, slash, _ = self.handle.partition("/")
        return prefix if slash else f"{self.workgraph_id[:8]}…"


@dataclass
class ErrorGroup:
    failure_class: str  # as people read it: application-error
    exit_codes: str
    backend: str
    site: str
    reason: str  # the normalised message the group shares
    message: str  # the latest failure's own words
    count: int
    first_seen: datetime | None
    last_seen: datetime | None
    examples: list[tuple[str, str]]  # (parcel id, handle or id)
    inputs: list[str]
    members: list[MemberName]
    over_time: list[int] = field(default_factory=list)  # failures per span, earliest first

    @property
    def spark(self) -> list[tuple[float, float]]:
        """The sparkline's bars, as (x, height) in a 96 by 20 box (the template draws them)."""
        highest = max(self.over_time, default=0)
        if not highest:
            return []
        width = 96 / len(self.over_time)
        return [
            (round(n * width, 2), round(20 * count / highest, 2))
            for n, count in enumerate(self.over_time)
            if count
        ]


@dataclass
class ErrorsPage:
    groups: list[ErrorGroup]
    window: str
    workgraph_id: str
    members: int  # how many members were asked about
    parcels_read: int
    truncated: bool
    workgraph_handle: str = ""  # "wg-42", when one workgraph's
    failed: int = field(init=False)

    def __post_init__(self) -> None:
        self.failed = sum(g.count for g in self.groups)


def group_of(found: execution_pb2.FailureGroup, known: dict[str, MemberName]) -> ErrorGroup:
    handles = list(found.example_parcel_handles)
    return ErrorGroup(
        failure_class=failure_class_from_proto(found.failure_class).value,
        exit_codes=", ".join(str(c) for c in found.exit_codes),
        backend=found.backend,
        site=found.site,
        reason=found.reason,
        message=found.message,
        count=found.count,
        first_seen=names.when(found.first_seen),
        last_seen=names.when(found.last_seen),
        examples=[
            (parcel, (handles[i] if i < len(handles) else "") or parcel)
            for i, parcel in enumerate(found.example_parcel_ids)
        ],
        inputs=list(found.example_input_ids),
        members=[
            known.get(t, MemberName(t, t, "")) for t in dict.fromkeys(found.transformation_ids)
        ],
        over_time=list(found.over_time),
    )


async def member_names(clients: UserClients, workgraph_id: str) -> dict[str, MemberName]:
    """Every member the user may see (of one workgraph, when named), by id."""
    request = definition_pb2.ListTransformationsRequest(
        workgraph_id=workgraph_id, without_attention=True
    )
    request.paging.page_size = 1000
    found: dict[str, MemberName] = {}
    while True:
        page = await clients.definition.ListTransformations(request)
        for t in page.transformations:
            found[t.transformation_id] = MemberName(
                t.transformation_id, t.step or t.transformation_id, t.workgraph_id, t.handle
            )
        if not page.next_page_token:
            return found
        request.paging.page_token = page.next_page_token


async def grouped(
    clients: UserClients, ids: list[str], since: datetime | None, examples: int = EXAMPLES
) -> tuple[list[execution_pb2.FailureGroup], int, bool]:
    """GroupFailures over `ids` in calls of IDS_PER_CALL: the groups (largest first), how many
    failed parcels were read, and whether any call read only the latest."""
    requests = []
    for start in range(0, len(ids), IDS_PER_CALL):
        request = execution_pb2.GroupFailuresRequest(
            transformation_ids=ids[start : start + IDS_PER_CALL], examples=examples, buckets=SPANS
        )
        if since is not None:
            request.since.FromDatetime(since)
        requests.append(request)
    replies = await asyncio.gather(*(clients.execution.GroupFailures(r) for r in requests))
    groups = [g for reply in replies for g in reply.groups]
    groups.sort(key=lambda g: -g.count)
    return (
        groups,
        sum(reply.parcels for reply in replies),
        any(reply.truncated for reply in replies),
    )


async def errors_page(
    clients: UserClients, window: str, workgraph_id: str, now: datetime | None = None
) -> ErrorsPage:
    window = window if window in WINDOWS else ""
    since = (now or datetime.now(UTC)) - WINDOWS[window] if window else None
    handle = ""
    if workgraph_id:
        # NOT_FOUND for a workgraph the user may not see, before anything else is read.
        got = await clients.definition.GetWorkgraph(
            definition_pb2.GetWorkgraphRequest(workgraph_id=workgraph_id)
        )
        handle = got.workgraph.handle
    known = await member_names(clients, workgraph_id)
    groups, read, truncated = (
        await grouped(clients, list(known), since) if known else ([], 0, False)
    )
    return ErrorsPage(
        groups=[group_of(g, known) for g in groups],
        window=window,
        workgraph_id=workgraph_id,
        members=len(known),
        parcels_read=read,
        truncated=truncated,
        workgraph_handle=handle,
    )
