"""What the workgraph pages show, gathered from the services' contracts.

The list: ListWorkgraphs (with its own filters) and every listed member's exact input counts
in one GetCounts. A workgraph: GetWorkgraph (members, feeder edges, approving actions) and
GetWorkgraphSummary (counts), GetDrainStatus (what holds each member from draining, the drain
guard's own reasons), the actions of blocked members (GetTransformation), and the log.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import grpc

from dxts.core.errors import DxtsError
from dxts.v1 import accounting_pb2, common_pb2, definition_pb2
from dxts.web import errors, names
from dxts.web.graph import Drawing, Node, layout
from dxts.web.names import SETTLED_INPUTS
from dxts.web.services import UserClients

# The list reads at most this many workgraphs (pages of the contract's maximum), then searches,
# sorts and pages them here: the contract filters by status, type, VO, owner and label, and
# has neither a text search nor an order by trouble.
LIST_READ = 2000
READ_PAGE = 1000
ROWS = 100
LOG_ENTRIES = 40
FAILURE_GROUPS_SHOWN = 5
FAILURES_BUDGET_S = 3.0
WORKGRAPH_STATUSES = {
    names.workgraph_status(number): number
    for number in common_pb2.WorkgraphStatus.values()
    if number
}
SORTS = {
    "trouble": "trouble first",
    "activity": "last activity",
    "started": "started",
    "handle": "handle",
    "title": "title",
    "status": "status",
    "progress": "least done",
}


@dataclass
class ListedWorkgraph:
    workgraph: definition_pb2.Workgraph
    status: str
    labels: dict[str, str]
    settled: int
    total: int
    updated: datetime | None
    title: str = ""
    processed: int = 0
    written_off: int = 0
    failed: int = 0  # inputs Failed (to be retried) or Problematic (waiting for a person)

    @property
    def progress(self) -> float:
        return self.settled / self.total if self.total else 0.0

    @property
    def handle(self) -> str:
        return self.workgraph.handle or self.workgraph.workgraph_id

    @property
    def submitted(self) -> datetime | None:
        """When it was submitted: its id's time (a UUIDv7)."""
        return names.created_at(self.workgraph.workgraph_id)

    @property
    def started(self) -> datetime | None:
        """When it was started: its log's first move out of New (None: not yet)."""
        return names.when(self.workgraph.started_at)

    @property
    def needs_attention(self) -> bool:
        return bool(self.workgraph.attention)

    @property
    def clean(self) -> bool:
        """Nothing written off, failing or ended badly: a finished one reads "Completed"."""
        return not (self.written_off or self.failed or self.workgraph.ended_with)

    def share(self, count: int) -> float:
        """`count` as a percentage of every input, for the bar's segments."""
        return 100 * count / self.total if self.total else 0.0

    @property
    def trouble(self) -> int:
        """0: needs a person now; 1: not clean (write-offs, failures); 2: fine."""
        return 0 if self.needs_attention else 1 if not self.clean else 2

    def matches(self, text: str) -> bool:
        """The search: `text` in the handle, id, title, type, owner or any label."""
        wanted = text.lower()
        haystack = [
            self.handle,
            self.workgraph.workgraph_id,
            self.title,
            self.workgraph.type,
            self.workgraph.owner_sub,
            *(f"{k}={v}" for k, v in self.labels.items()),
        ]
        return any(wanted in field.lower() for field in haystack)


@dataclass
class Filters:
    status: str = ""
    label: str = ""  # key=value
    owner: str = ""
    search: str = ""
    attention: str = ""  # "yes": only those needing a person; "no": only the others
    vo: str = ""
    type: str = ""
    sort: str = "trouble"
    page: int = 0

    @classmethod
    def of(cls, query: Any) -> Filters:
        """The filters a query string asks for; anything unknown reads as no filter."""
        sort = query.get("sort", "trouble")
        try:
            page = max(0, int(query.get("page", "0") or 0))
        except ValueError:
            page = 0
        return cls(
            status=query.get("status", ""),
            label=query.get("label", ""),
            owner=query.get("owner", "").strip(),
            search=query.get("q", "").strip(),
            attention=query.get("attention", "") if query.get("attention") in ("yes", "no") else "",
            vo=query.get("vo", "").strip(),
            type=query.get("type", "").strip(),
            sort=sort if sort in SORTS else "trouble",
            page=page,
        )

    def query(self, **changed: Any) -> str:
        """This listing's query string, with `changed` (a link to another sort or page)."""
        values = {
            "q": self.search,
            "status": self.status,
            "attention": self.attention,
            "vo": self.vo,
            "type": self.type,
            "owner": self.owner,
            "label": self.label,
            "sort": self.sort,
            "page": self.page,
        } | changed
        return urlencode({k: v for k, v in values.items() if v not in ("", 0, "trouble")})

    def request(self, page_token: str) -> definition_pb2.ListWorkgraphsRequest:
        request = definition_pb2.ListWorkgraphsRequest(
            paging=common_pb2.Paging(page_size=READ_PAGE, page_token=page_token),
            owner_sub=self.owner,
            vo=self.vo,
            type=self.type,
        )
        if self.status in WORKGRAPH_STATUSES:
            request.statuses.append(WORKGRAPH_STATUSES[self.status])
        key, separator, value = self.label.partition("=")
        if separator and key:
            request.labels[key.strip()] = value.strip()
        return request


@dataclass
class Listing:
    rows: list[ListedWorkgraph]
    matched: int  # how many matched the filters (of those read)
    read: int
    more_unread: bool  # LIST_READ were read and the service had more
    attention: int  # how many matched ones need a person

    @property
    def pages(self) -> int:
        return max(1, -(-self.matched // ROWS))


def labels_of(annotations_json: str) -> dict[str, str]:
    """The labels among a workgraph's or transformation's annotations."""
    try:
        labels = (json.loads(annotations_json or "{}") or {}).get("labels") or {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def title_of(annotations_json: str) -> str:
    """What a workgraph calls itself: its document's label, else its id (as `dxts list`)."""
    try:
        found = json.loads(annotations_json or "{}") or {}
    except ValueError:
        return ""
    return str(found.get("label") or found.get("id") or "") if isinstance(found, dict) else ""


def _sort_key(sort: str) -> Callable[[ListedWorkgraph], Any]:
    def recent(w: ListedWorkgraph) -> float:
        return -(w.updated.timestamp() if w.updated else 0.0)

    return {
        "trouble": lambda w: (w.trouble, recent(w)),
        "activity": recent,
        "started": lambda w: -(w.started.timestamp() if w.started else 0.0),
        "handle": lambda w: (len(w.handle), w.handle),
        "title": lambda w: (w.title.lower(), w.handle),
        "status": lambda w: (w.status, recent(w)),
        "progress": lambda w: (w.progress, recent(w)),
    }[sort]


async def list_workgraphs(clients: UserClients, filters: Filters) -> Listing:
    """The workgraphs the filters match, trouble first unless another order is asked, one
    page of ROWS. The contract's filters narrow what is read; the search, the attention filter,
    the order and the paging are applied here to at most LIST_READ workgraphs."""
    read: list[definition_pb2.Workgraph] = []
    token = ""
    while len(read) < LIST_READ:
        page = await clients.definition.ListWorkgraphs(filters.request(token))
        read.extend(page.workgraphs)
        token = page.next_page_token
        if not token:
            break
    listed = []
    for w in read:
        members = [names.counts(w.input_counts)]  # its members' inputs, summed by definition
        listed.append(
            ListedWorkgraph(
                workgraph=w,
                status=names.workgraph_status(w.status),
                labels=labels_of(w.annotations_json),
                settled=sum(m.get(s, 0) for m in members for s in SETTLED_INPUTS),
                total=sum(sum(m.values()) for m in members),
                updated=names.when(w.updated_at),
                title=title_of(w.annotations_json),
                processed=sum(m.get("Processed", 0) + m.get("Split", 0) for m in members),
                written_off=sum(m.get("NotProcessed", 0) for m in members),
                failed=sum(m.get("Failed", 0) + m.get("Problematic", 0) for m in members),
            )
        )
    if filters.search:
        listed = [w for w in listed if w.matches(filters.search)]
    if filters.attention:
        listed = [w for w in listed if w.needs_attention == (filters.attention == "yes")]
    listed.sort(key=_sort_key(filters.sort))
    start = filters.page * ROWS
    return Listing(
        rows=listed[start : start + ROWS],
        matched=len(listed),
        read=len(read),
        more_unread=bool(token),
        attention=sum(w.needs_attention for w in listed),
    )


# -- one workgraph ------------------------------------------------------------------------------


@dataclass
class Member:
    transformation: definition_pb2.Transformation
    status: str
    inputs: dict[str, int]
    parcels: dict[str, int]
    blocked_by: list[definition_pb2.Action] = field(default_factory=list)
    # What holds it from draining, as the drain guard says (GetDrainStatus).
    holding: list[definition_pb2.DrainReason] = field(default_factory=list)

    @property
    def step(self) -> str:
        return self.transformation.step or self.transformation.transformation_id


@dataclass
class WorkgraphPage:
    workgraph: definition_pb2.Workgraph
    status: str
    members: list[Member]
    approving: list[definition_pb2.Action]
    log: list[accounting_pb2.LogEntry]
    drawing: Drawing
    reasons: list[str]
    labels: dict[str, str]
    blocking: list[tuple[str, definition_pb2.Action]]
    # Its members' failures grouped as /errors and `dxts errors` group them, largest first.
    failures: list[errors.ErrorGroup] = field(default_factory=list)
    failure_groups: int = 0
    failures_missing: str = ""  # why the panel is not shown (the errors page has them)


def _failed_or_pending(actions: Any) -> list[definition_pb2.Action]:
    stuck = (common_pb2.ACTION_RESULT_FAILED, common_pb2.ACTION_RESULT_PENDING)
    return [a for a in actions if a.result in stuck]


async def workgraph_page(clients: UserClients, workgraph_id: str) -> WorkgraphPage:
    got, drain, summary, log = await asyncio.gather(
        clients.definition.GetWorkgraph(
            definition_pb2.GetWorkgraphRequest(workgraph_id=workgraph_id)
        ),
        clients.definition.GetDrainStatus(
            definition_pb2.GetDrainStatusRequest(workgraph_id=workgraph_id)
        ),
        clients.accounting.GetWorkgraphSummary(
            accounting_pb2.GetWorkgraphSummaryRequest(workgraph_id=workgraph_id)
        ),
        clients.accounting.ListLog(
            accounting_pb2.ListLogRequest(
                workgraph_id=workgraph_id,
                newest_first=True,
                paging=common_pb2.Paging(page_size=LOG_ENTRIES),
            )
        ),
    )
    counted = {m.transformation_id: m for m in summary.members}
    held = {m.transformation_id: list(m.reasons) for m in drain.members}
    members = []
    for t in got.members:
        found = counted.get(t.transformation_id)
        members.append(
            Member(
                t,
                names.transformation_status(found.status if found else t.status),
                names.counts(found.input_counts) if found else {},
                names.counts(found.parcel_counts) if found else {},
                holding=held.get(t.transformation_id, []),
            )
        )
    blocked = [m for m in members if m.status.endswith("Blocked") or m.status == "Finalizing"]
    ids = [m.transformation.transformation_id for m in members]
    failing, *details = await asyncio.gather(
        _failures_within(clients, ids),
        *(
            clients.definition.GetTransformation(
                definition_pb2.GetTransformationRequest(
                    transformation_id=m.transformation.transformation_id
                )
            )
            for m in blocked
        ),
    )
    known = {
        m.transformation.transformation_id: errors.MemberName(
            m.transformation.transformation_id, m.step, workgraph_id, m.transformation.handle
        )
        for m in members
    }
    for member, detail in zip(blocked, details, strict=True):
        member.blocked_by = _failed_or_pending(
            a for a in detail.actions if a.state in member.status
        )
    groups = [] if isinstance(failing, str) else failing[0]
    status = names.workgraph_status(summary.status or got.workgraph.status)
    approving = list(got.actions)
    blocking = [(m.step, a) for m in members for a in m.blocked_by]
    if status in ("Approving", "ApprovingBlocked"):
        blocking = [("workgraph", a) for a in _failed_or_pending(approving)] + blocking
    nodes = [
        Node(
            id=m.transformation.transformation_id,
            label=m.step,
            upstream=list(m.transformation.upstream_transformation_ids),
            status=m.status,
            kind=names.kind(m.transformation.kind),
            inputs=m.inputs,
            href=f"/transformations/{m.transformation.transformation_id}",
        )
        for m in members
    ]
    return WorkgraphPage(
        workgraph=got.workgraph,
        status=status,
        members=members,
        approving=approving,
        log=list(log.entries),
        drawing=layout(nodes),
        reasons=not_finishing(status, got.workgraph, members),
        labels=labels_of(got.workgraph.annotations_json),
        blocking=blocking,
        failures=[errors.group_of(g, known) for g in groups[:FAILURE_GROUPS_SHOWN]],
        failure_groups=len(groups),
        failures_missing=failing if isinstance(failing, str) else "",
    )


async def _failures_within(
    clients: UserClients, ids: list[str]
) -> tuple[list[Any], int, bool] | str:
    """Its members' failure groups, or why they are not shown: the panel is a summary the
    errors page has in full, so it gets FAILURES_BUDGET_S and never takes the page down."""
    if not ids:
        return [], 0, False
    try:
        return await asyncio.wait_for(
            errors.grouped(clients, ids, None, examples=3), FAILURES_BUDGET_S
        )
    except TimeoutError:
        return f"grouping its failures took longer than {FAILURES_BUDGET_S:g} s"
    except (DxtsError, grpc.aio.AioRpcError) as error:
        return f"its failures could not be grouped: {error}"


def not_finishing(
    status: str, workgraph: definition_pb2.Workgraph, members: list[Member]
) -> list[str]:
    """Why the workgraph has not finished: its own state, then what holds each member from
    draining as the drain guard says (GetDrainStatus), then blocking actions. Empty once it
    has finished."""
    if status in names.FINISHED:
        return []
    reasons = []
    if status == "New":
        reasons.append("it has not been started")
    if status in ("Scouting", "Approving", "ApprovingBlocked"):
        reasons.append(f"it is {status}: the rest runs once the scout is approved")
    if workgraph.halted:
        reasons.append("it is halted")
    for m in members:
        if m.status in names.FINISHED:
            continue
        reasons.extend(f"{m.step}: {_worded(r)}" for r in m.holding)
        for action in m.blocked_by:
            result = names.named_result(action.result)
            reasons.append(
                f"{m.step}: action #{action.action_id} {action.action} {result}"
                + (f": {action.message}" if action.message else "")
            )
    return reasons


def _worded(reason: definition_pb2.DrainReason) -> str:
    """A drain reason with what a person can do about it, where something can be done."""
    if reason.kind == "inputs" and reason.state == "Problematic":
        return f"{reason.message} (reset or write them off)"
    if reason.kind == "status" and reason.state == "Paused":
        return f"{reason.message} (resume it)"
    return reason.message
