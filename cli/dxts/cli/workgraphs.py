"""Workgraphs: submit, list, show, watch, logs."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dxts.cli import attention
from dxts.cli import output as output_module
from dxts.cli.client import Clients, request_id, run
from dxts.cli.names import entity, resolve
from dxts.cli.names import workgraph_id as resolve_workgraph
from dxts.cli.output import (
    Output,
    OutputOption,
    compact,
    counts,
    labels,
    message_dict,
    name,
    parse_enum,
    print_json,
    table,
    terminal_width,
    when,
)
from dxts.core.errors import InvalidArgument
from dxts.core.states import (
    ActionResult,
    InputStatus,
    Kind,
    TransformationStatus,
    WorkgraphStatus,
)
from dxts.v1 import accounting_pb2, common_pb2, definition_pb2

if TYPE_CHECKING:
    from rich.tree import Tree

    from dxts.v1 import execution_pb2

# `dxts watch` ends with one of these (1 and 2 are every command's: failed call, bad usage).
EXIT_BLOCKED = 3
EXIT_CANCELLED = 4
EXIT_TIMEOUT = 5
# Something needs a person (`Workgraph.attention`): the first item is printed.
EXIT_ATTENTION = 6

DONE_STATES = {WorkgraphStatus.COMPLETED, WorkgraphStatus.ARCHIVING, WorkgraphStatus.ARCHIVED}
BLOCKED_STATES = {
    "ApprovingBlocked",
    "FinalizingBlocked",
    "ArchivingBlocked",
    "CancellingBlocked",
}
# Inputs that have ended (the input machine's terminal states): a member's progress is these
# over all its inputs.
SETTLED_INPUTS = (InputStatus.PROCESSED, InputStatus.SPLIT, InputStatus.NOT_PROCESSED)

LabelOption = Annotated[
    list[str] | None, typer.Option("--label", "-l", help="k=v; repeat for several.")
]


# -- submit -----------------------------------------------------------------------------------


def submit(
    ctx: typer.Context,
    document: Annotated[Path, typer.Argument(help="The workgraph document (YAML or JSON).")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate and print the plan; store nothing.")
    ] = False,
    label: LabelOption = None,
    bundle_root: Annotated[
        Path | None,
        typer.Option(
            "--bundle", help="Directory relative `run` paths resolve in (default: the document's)."
        ),
    ] = None,
    output: OutputOption = Output.TEXT,
) -> None:
    """Submit a workgraph; prints its id (with --dry-run, the plan as a tree).

    Every problem with the document is printed on a line of its own, as `dxts validate` prints
    them (`error  kind  path  message`), and the command exits 1.
    """

    from dxts.cli.documents import bundle  # YAML: for the verbs that read a document only

    async def body(clients: Clients) -> definition_pb2.SubmitWorkgraphResponse:
        return await clients.definition.SubmitWorkgraph(
            definition_pb2.SubmitWorkgraphRequest(
                request_id=request_id(),
                bundle=bundle(document, bundle_root),
                labels=labels(label),
                dry_run=dry_run,
            )
        )

    reply = run(ctx, body)
    if output is Output.JSON:
        print_json(message_dict(reply))
        return
    for warning in reply.warnings:
        typer.echo(f"warning  {warning.code}  {warning.path or '.'}  {warning.message}", err=True)
    if dry_run:
        output_module.console.print(_plan_tree(document, reply))
    else:
        typer.echo(reply.workgraph_id)


def _plan_tree(document: Path, reply: definition_pb2.SubmitWorkgraphResponse) -> Tree:
    from rich.tree import Tree

    tree = Tree(
        f"[bold]{document.name}[/] (dry run): {len(reply.plan)} transformations"
        + (", scouts first" if reply.scouts else "")
    )
    for member in reply.plan:
        node = tree.add(
            f"[bold]{member.step}[/] {name(Kind, member.kind)} {member.type} → "
            f"{name(TransformationStatus, member.initial_status)} at start"
        )
        node.add(f"feeder {member.feeder or '-'}")
        node.add(f"packer {member.packer or '-'}")
        if member.process_id:
            node.add(f"process sha256-{member.process_id[:16]}…")
        if member.upstream_steps:
            node.add(f"after {', '.join(member.upstream_steps)}")
    return tree


# -- list ---------------------------------------------------------------------------------------


def list_workgraphs(
    ctx: typer.Context,
    status: Annotated[
        list[str] | None, typer.Option("--status", "-s", help="Only these statuses; repeatable.")
    ] = None,
    type_: Annotated[str, typer.Option("--type", help="Only this workgraph type.")] = "",
    vo: Annotated[str, typer.Option(help="Only this VO.")] = "",
    owner: Annotated[str, typer.Option(help="Only this owner (token subject).")] = "",
    label: LabelOption = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 100,
    output: OutputOption = Output.TEXT,
) -> None:
    """List workgraphs, newest last."""

    async def body(
        clients: Clients,
    ) -> tuple[list[definition_pb2.Workgraph], dict[str, dict[str, int]]]:
        request = definition_pb2.ListWorkgraphsRequest(
            statuses=[parse_enum(WorkgraphStatus, s, field="--status") for s in status or []],  # type: ignore[misc]
            type=type_,
            vo=vo,
            owner_sub=owner,
            labels=labels(label),
        )
        found: list[definition_pb2.Workgraph] = []
        while len(found) < limit:
            request.paging.page_size = min(limit - len(found), 500)
            page = await clients.definition.ListWorkgraphs(request)
            found.extend(page.workgraphs)
            if not page.next_page_token:
                break
            request.paging.page_token = page.next_page_token
        found = found[:limit]
        if output is Output.JSON:
            return found, {}
        return found, await input_counts(clients, [t for w in found for t in w.transformation_ids])

    found, inputs = run(ctx, body)
    if output is Output.JSON:
        print_json([message_dict(w) for w in found])
        return
    from dxts.cli.tables import workgraph_table

    statuses = {w.workgraph_id: name(WorkgraphStatus, w.status) for w in found}
    typer.echo(workgraph_table(found, statuses, inputs, width=terminal_width()))


# GetCounts' limit on ids per request.
COUNTS_PER_CALL = 1000


async def input_counts(clients: Clients, ids: list[str]) -> dict[str, dict[str, int]]:
    """Each transformation's input counts by status, in as few GetCounts as allowed (one for
    up to COUNTS_PER_CALL members)."""
    found: dict[str, dict[str, int]] = {}
    for start in range(0, len(ids), COUNTS_PER_CALL):
        reply = await clients.accounting.GetCounts(
            accounting_pb2.GetCountsRequest(
                transformation_ids=ids[start : start + COUNTS_PER_CALL],
                entity=common_pb2.ENTITY_INPUT,
            )
        )
        found.update({c.transformation_id: counts(c.counts) for c in reply.counts})
    return found


# -- show ---------------------------------------------------------------------------------------


@dataclass
class MemberView:
    transformation: definition_pb2.Transformation
    status: str
    inputs: dict[str, int]
    parcels: dict[str, int]
    blocked_by: list[definition_pb2.Action] = field(default_factory=list)
    # Every action of the member (its Finalizing checks...): read for `show` only.
    actions: list[definition_pb2.Action] = field(default_factory=list)
    # What holds it from draining, as the drain guard says (GetDrainStatus): `why`, `show`.
    holding: list[definition_pb2.DrainReason] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        return self.status in BLOCKED_STATES

    def settled(self) -> int:
        return sum(self.inputs.get(s.value, 0) for s in SETTLED_INPUTS)

    def as_json(self) -> dict[str, Any]:
        return {
            "transformation": message_dict(self.transformation),
            "status": self.status,
            "input_counts": self.inputs,
            "parcel_counts": self.parcels,
            "blocked_by": [message_dict(a) for a in self.blocked_by],
            "actions": [message_dict(a) for a in self.actions],
            "holding": [message_dict(r) for r in self.holding],
            "attention": [message_dict(a) for a in self.transformation.attention],
        }


@dataclass
class WorkgraphView:
    """A workgraph with its members' exact counts: what `show` prints and `watch` follows."""

    workgraph: definition_pb2.Workgraph
    members: list[MemberView]
    approving: list[definition_pb2.Action]

    @property
    def blocked_by(self) -> list[definition_pb2.Action]:
        return _failed(self.approving) if self.status.value in BLOCKED_STATES else []

    @property
    def status(self) -> WorkgraphStatus:
        return WorkgraphStatus(name(WorkgraphStatus, self.workgraph.status))

    @property
    def blocked(self) -> bool:
        return self.status.value in BLOCKED_STATES or any(m.blocked for m in self.members)

    def as_json(self) -> dict[str, Any]:
        return {
            "workgraph": message_dict(self.workgraph),
            "status": self.status.value,
            "members": [m.as_json() for m in self.members],
            "approving": [message_dict(a) for a in self.approving],
            "blocked_by": [message_dict(a) for a in self.blocked_by],
            "attention": [message_dict(a) for a in self.workgraph.attention],
        }


def _failed(actions: Any) -> list[definition_pb2.Action]:
    failed = common_pb2.ACTION_RESULT_FAILED
    return [a for a in actions if a.result == failed]


async def gather(
    clients: Clients, workgraph_id: str, *, actions: bool = False, drain: bool = False
) -> WorkgraphView:
    """The workgraph (definition) and its counts (accounting), with the failed actions of
    whatever is blocked (and, with `actions`, every member's actions; with `drain`, what holds
    each member from draining)."""
    got = await clients.definition.GetWorkgraph(
        definition_pb2.GetWorkgraphRequest(workgraph_id=workgraph_id)
    )
    held: dict[str, list[definition_pb2.DrainReason]] = {}
    if drain:
        drained = await clients.definition.GetDrainStatus(
            definition_pb2.GetDrainStatusRequest(workgraph_id=workgraph_id)
        )
        held = {m.transformation_id: list(m.reasons) for m in drained.members}
    summary = await clients.accounting.GetWorkgraphSummary(
        accounting_pb2.GetWorkgraphSummaryRequest(workgraph_id=workgraph_id)
    )
    counted = {m.transformation_id: m for m in summary.members}
    members = []
    for member in got.members:
        found = counted.get(member.transformation_id)
        status = found.status if found is not None else member.status
        view = MemberView(
            member,
            name(TransformationStatus, status),
            counts(found.input_counts) if found else {},
            counts(found.parcel_counts) if found else {},
            holding=held.get(member.transformation_id, []),
        )
        if view.blocked or actions:
            detail = await clients.definition.GetTransformation(
                definition_pb2.GetTransformationRequest(transformation_id=member.transformation_id)
            )
            # The status read with the actions, so that "blocked" always comes with what blocks
            # it: a reset between the two reads would otherwise leave a blocked status with no
            # failed action.
            view.status = name(TransformationStatus, detail.transformation.status)
            view.blocked_by = _failed(detail.actions) if view.blocked else []
            view.actions = list(detail.actions)
        members.append(view)
    # The workgraph's status as read with its actions (accounting's copy may be newer than
    # them, and a blocked status must come with the action that blocks it).
    return WorkgraphView(got.workgraph, members, list(got.actions))


def _action_text(action: definition_pb2.Action) -> str:
    return f"#{action.action_id} {action.action}: {action.message or 'failed'}"


def show(
    ctx: typer.Context,
    workgraph_id: Annotated[
        str,
        typer.Argument(
            metavar="WG", help="The workgraph (wg-42, or its id), or a member as WG/STEP."
        ),
    ],
    output: OutputOption = Output.TEXT,
) -> None:
    """A workgraph and its members, with their exact counts (WG/STEP shows the member's
    workgraph).

    Per member: status, feeder on/off, inputs and parcels by status, and the failed action
    holding up a blocked member.
    """

    async def body(clients: Clients) -> WorkgraphView:
        found = await resolve(clients, workgraph_id, field="WG")
        if found.kind == "workgraph":
            return await gather(clients, found.id, actions=True, drain=True)
        if not found.workgraph_id:
            raise InvalidArgument(f"{found.handle} is in no workgraph", field="WG")
        # A member: its workgraph, with that member's row only.
        view = await gather(clients, found.workgraph_id, actions=True, drain=True)
        view.members = [m for m in view.members if m.transformation.transformation_id == found.id]
        return view

    view = run(ctx, body)
    if output is Output.JSON:
        print_json(view.as_json())
        return
    from dxts.cli.tables import annotations_of, labels_text, member_table, title

    w = view.workgraph
    named = w.handle or w.workgraph_id
    annotations = annotations_of(w)

    def line(text: str) -> None:
        """One line, cut with an ellipsis at the terminal's edge."""
        output_module.console.print(text, no_wrap=True, overflow="ellipsis", markup=False)

    line(
        f"{named} {title(annotations)} — {attention.status_text(view.status.value, w)} — "
        f"{w.type}, "
        f"{w.owner_sub}@{w.vo}"
    )
    line(f"id {w.workgraph_id}  labels {labels_text(annotations) or '-'}")
    for item in w.attention:
        line(f"needs attention: {attention.line(item)}")
    for action in view.approving:
        result = name(ActionResult, action.result)
        line(f"approving #{action.action_id} {action.action}: {result} {action.message}")
    for action in view.blocked_by:
        line(f"blocked by {_action_text(action)}")
    typer.echo(
        member_table(
            view.members,
            width=terminal_width(),
            actions=lambda m: "; ".join(_action_text(a) for a in m.blocked_by),
        )
    )
    from dxts.cli.inspect import holding  # `why`'s reasons (inspect builds on this module)

    for reason in holding(view):
        output_module.console.print(f"why: {reason}", markup=False)  # wrapped at the width
    member_actions = _action_table(view)
    if member_actions is not None:
        typer.echo(member_actions)
    output_module.console.print(
        f"A member is named as {named}/STEP; an action by its number (dxts force 27 passed)."
    )


# Cleaning up after the end (Archiving, Cancelling) is shown only when it is under way.
CLEAN_UP_STATES = frozenset({"Archiving", "Cancelling"})


def _action_table(view: WorkgraphView) -> str | None:
    from dxts.cli.tables import Column, fitted

    columns = [Column("action"), Column("member"), Column("state"), Column("check", flex=1)]
    columns += [Column("result"), Column("message", flex=2)]
    rows = []
    for m in view.members:
        for a in m.actions:
            if a.state in CLEAN_UP_STATES and not m.status.startswith(a.state):
                continue
            rows.append(
                [
                    f"#{a.action_id}",
                    m.transformation.handle or m.transformation.step,
                    a.state,
                    a.action,
                    name(ActionResult, a.result),
                    a.message,
                ]
            )
    return fitted(columns, rows, terminal_width()) if rows else None


# -- watch --------------------------------------------------------------------------------------


def watch(
    ctx: typer.Context,
    workgraph_id: Annotated[str, typer.Argument(metavar="WG", help="The workgraph id.")],
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between reads.")] = 2.0,
    timeout: Annotated[
        float | None, typer.Option(min=0, help="Give up after this many seconds.")
    ] = None,
    output: OutputOption = Output.TEXT,
) -> None:
    """Follow a workgraph with a progress bar per member until it ends or is blocked.

    A bar counts a member's settled inputs (Processed, Split, NotProcessed) over all of them.
    Exits 0 once Completed, 3 when blocked (a failed check holds it), 4 when cancelled, 5 when
    --timeout passes, 6 when it needs attention (Problematic inputs, too many failed parcels,
    no progress, lost parcels: `dxts why` tells), printing the first reason.
    """

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    async def body(clients: Clients) -> tuple[WorkgraphView, int]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            console=output_module.console,
            disable=output is Output.JSON,
        ) as progress:
            bars: dict[str, Any] = {}
            paces: dict[str, Pace] = {}
            workgraph = await resolve_workgraph(clients, workgraph_id)
            while True:
                view = await gather(clients, workgraph)
                for m in view.members:
                    t = m.transformation
                    if t.transformation_id not in bars:
                        bars[t.transformation_id] = progress.add_task(t.step, detail="", total=None)
                    total = sum(m.inputs.values())
                    pace = paces.setdefault(t.transformation_id, Pace())
                    pace.add(time.monotonic(), m.settled())
                    progress.update(
                        bars[t.transformation_id],
                        total=total or None,
                        completed=m.settled(),
                        detail=f"{m.status}  {pace.text(total)}  parcels: {compact(m.parcels)}",
                    )
                ended = _ending(view)
                if ended is not None:
                    return view, ended
                if deadline is not None and time.monotonic() >= deadline:
                    return view, EXIT_TIMEOUT
                await asyncio.sleep(interval)

    view, code = run(ctx, body)
    if output is Output.JSON:
        print_json({**view.as_json(), "exit": code})
    else:
        output_module.console.print(_ending_line(view, code))
    raise typer.Exit(code)


@dataclass
class Pace:
    """A member's settled inputs over its last readings: the rate, and the time left at it."""

    readings: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=30))

    def add(self, now: float, settled: int) -> None:
        self.readings.append((now, settled))

    def text(self, total: int) -> str:
        """ "12.0/min, ETA 2m30s"; "" before two readings; "idle" when nothing settles."""
        if len(self.readings) < 2:
            return ""
        (then, before), (now, settled) = self.readings[0], self.readings[-1]
        rate = (settled - before) / (now - then) if now > then else 0.0
        if rate <= 0:
            return "idle" if settled < total else ""
        left = max(total - settled, 0) / rate
        return f"{rate * 60:.1f}/min, ETA {_duration(left)}"


def _duration(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, seconds_left = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds_left:02d}s" if minutes else f"{seconds_left}s"


def _ending(view: WorkgraphView) -> int | None:
    if view.status in DONE_STATES:
        return 0
    if view.status is WorkgraphStatus.CANCELLED:
        return EXIT_CANCELLED
    if view.blocked:
        return EXIT_BLOCKED
    if attention.beyond_checks(view.workgraph.attention):
        return EXIT_ATTENTION
    return None


def _ending_line(view: WorkgraphView, code: int) -> str:
    wg = view.workgraph.workgraph_id
    if code == 0:
        return f"{wg} {attention.status_text(view.status.value, view.workgraph)}"
    if code == EXIT_BLOCKED:
        held = [(view.status.value, a) for a in view.blocked_by] + [
            (f"{m.transformation.step} {m.status}", a) for m in view.members for a in m.blocked_by
        ]
        reasons = "; ".join(f"{where}: {_action_text(a)}" for where, a in held)
        return f"{wg} blocked: {reasons or 'a person is needed'}"
    if code == EXIT_CANCELLED:
        return f"{wg} Cancelled"
    if code == EXIT_ATTENTION:
        first = attention.beyond_checks(view.workgraph.attention)[0]
        return f"{wg} needs attention: {attention.line(first)}"
    return f"{wg} still {view.status.value}: gave up waiting"


# -- logs ---------------------------------------------------------------------------------------


def logs(
    ctx: typer.Context,
    entity_id: Annotated[
        str, typer.Argument(metavar="WG|TF", help="A workgraph, or a member (id or WG/Step).")
    ],
    limit: Annotated[int, typer.Option(min=1, help="At most this many entries.")] = 100,
    newest_first: Annotated[bool, typer.Option(help="Newest entries first.")] = False,
    output: OutputOption = Output.TEXT,
) -> None:
    """The log of a workgraph or a transformation: status changes, operations, authors; its
    failures first, grouped (`dxts errors`), each with its class and the tool's own line."""
    from dxts.cli.failures import failing_lines, grouped, member_ids  # this verb's only

    failing: list[execution_pb2.FailureGroup] = []

    async def body(clients: Clients) -> list[accounting_pb2.LogEntry]:
        request = accounting_pb2.ListLogRequest(newest_first=newest_first)
        failing.extend(await grouped(clients, await member_ids(clients, entity_id), None))
        kind, found = await entity(clients, entity_id)
        setattr(request, f"{kind}_id", found)
        entries: list[accounting_pb2.LogEntry] = []
        while len(entries) < limit:
            request.paging.page_size = min(limit - len(entries), 500)
            page = await clients.accounting.ListLog(request)
            entries.extend(page.entries)
            if not page.next_page_token:
                break
            request.paging.page_token = page.next_page_token
        return entries[:limit]

    entries = run(ctx, body)
    if output is Output.JSON:
        print_json([message_dict(e) for e in entries])
        return
    for line in failing_lines(failing):
        typer.echo(line)
    rows = table("time", "event", "status", "author", "message")
    for entry in entries:
        rows.add_row(
            when(entry.created_at),
            entry.event_type,
            _status_change(entry),
            entry.author,
            entry.message,
        )
    output_module.console.print(rows)


def _status_change(entry: accounting_pb2.LogEntry) -> str:
    old, new = entry.WhichOneof("old_status"), entry.WhichOneof("new_status")
    if new is None:
        return ""
    enum = WorkgraphStatus if new == "new_workgraph_status" else TransformationStatus
    before = name(enum, getattr(entry, old)) if old else "-"
    return f"{before} → {name(enum, getattr(entry, new))}"
