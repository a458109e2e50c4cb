"""Finding out why: what holds a workgraph or a member (`why`), a member's parcels and inputs,
and one parcel in full (outcome, failure reason, the backend's raw status, usage, inputs,
outputs). Read-only; everything comes from the contracts' List/Get calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from dxts.cli.client import Clients, run
from dxts.cli.failures import failure_line
from dxts.cli.names import entity, member_id
from dxts.cli.names import parcel_id as resolve_parcel
from dxts.cli.output import (
    Output,
    OutputOption,
    compact,
    console,
    message_dict,
    name,
    parse_enum,
    print_json,
    table,
    when,
)
from dxts.cli.workgraphs import MemberView, WorkgraphView, gather
from dxts.core.grpc.calls import method_on, request_type
from dxts.core.states import (
    InputStatus,
    Kind,
    ParcelStatus,
    TransformationStatus,
    WorkgraphStatus,
)
from dxts.v1 import common_pb2, definition_pb2, dispatcher_pb2, execution_pb2
from dxts.v1.execution_pb2_grpc import ExecutionServiceServicer as Execution

ENDED_MEMBERS = {
    TransformationStatus.COMPLETED.value,
    TransformationStatus.FINALIZED.value,
    TransformationStatus.ARCHIVED.value,
    TransformationStatus.CANCELLED.value,
}
Limit = Annotated[int, typer.Option(min=1, help="At most this many.")]
Statuses = Annotated[
    list[str] | None, typer.Option("--status", "-s", help="Only these statuses; repeatable.")
]

# -- why ----------------------------------------------------------------------------------------


def why(
    ctx: typer.Context,
    target: Annotated[
        str, typer.Argument(metavar="WG|TF", help="A workgraph, or a member (id or WG/Step).")
    ],
    output: OutputOption = Output.TEXT,
) -> None:
    """What holds a workgraph or a member now, in plain words, with the command that helps.

    Looks at: the failed action blocking it (and its message), a sign-off waited for,
    Problematic inputs, paused members, an active feeder, parcels in flight, and members
    waiting on another member.
    """

    async def body(clients: Clients) -> tuple[str, list[str]]:
        kind, found = await entity(clients, target)
        if kind == "workgraph":
            view = await gather(clients, found, actions=True, drain=True)
            return view.workgraph.workgraph_id, workgraph_reasons(view)
        got = await clients.definition.GetTransformation(
            definition_pb2.GetTransformationRequest(transformation_id=found)
        )
        member = got.transformation
        if not member.workgraph_id:
            return found, [f"standalone {name(Kind, member.kind)} transformation"]
        view = await gather(clients, member.workgraph_id, actions=True, drain=True)
        chosen = [m for m in view.members if m.transformation.transformation_id == found]
        return found, member_reasons(view, chosen[0]) if chosen else []

    subject, reasons = run(ctx, body)
    if output is Output.JSON:
        print_json({"id": subject, "reasons": reasons})
        return
    for reason in reasons or ["nothing holds it"]:
        typer.echo(reason)


def workgraph_reasons(view: WorkgraphView) -> list[str]:
    """Every reason the workgraph is where it is, the workgraph's own first."""
    w = view.workgraph
    reasons = [
        f"workgraph {w.handle or w.workgraph_id} is {view.status.value}"
        + (" (halted)" if w.halted else "")
    ]
    reasons.extend(_own_reasons(view))
    for member in view.members:
        reasons.extend(member_reasons(view, member))
    return reasons


def holding(view: WorkgraphView) -> list[str]:
    """The reasons without the statuses (what `show` prints under its table, which has them)."""
    return [
        *_own_reasons(view),
        *(
            f"{member.transformation.step}: {line.strip()}"
            for member in view.members
            for line in member_reasons(view, member)[1:]
        ),
    ]


def _own_reasons(view: WorkgraphView) -> list[str]:
    """What holds the workgraph itself: not started, a failed or pending approving action."""
    w = view.workgraph
    status = view.status
    reasons = []
    if status is WorkgraphStatus.NEW:
        reasons.append(f"it has not been started: dxts start {w.handle or w.workgraph_id}")
    for action in view.approving:
        if action.result == common_pb2.ACTION_RESULT_FAILED:
            reasons.append(
                f"approving check #{action.action_id} {action.action} failed: "
                f"{action.message or 'no message'} (dxts force {action.action_id} passed, or "
                f"dxts reset {action.action_id} to run it again)"
            )
        elif action.result == common_pb2.ACTION_RESULT_PENDING and status in (
            WorkgraphStatus.APPROVING,
            WorkgraphStatus.APPROVING_BLOCKED,
        ):
            reasons.append(
                f"approving step #{action.action_id} {action.action} is pending"
                + (
                    f": sign it off with dxts force {action.action_id} passed"
                    if action.action == "ManualApproval"
                    else ""
                )
            )
    return reasons


def member_reasons(view: WorkgraphView, member: MemberView) -> list[str]:
    t = member.transformation
    who = t.handle or f"{t.step} ({t.transformation_id})"
    if member.status in ENDED_MEMBERS:
        return [f"{who} is {member.status}"]
    reasons = [f"{who} is {member.status}"]
    for action in member.blocked_by or _failed_actions(member):
        reasons.append(
            f"  {member.status} check #{action.action_id} {action.action} failed: "
            f"{action.message or 'no message'} (dxts force {action.action_id} passed, or "
            f"dxts reset {action.action_id})"
        )
    reasons.extend(_drain_lines(view, member))
    by_id = {m.transformation.transformation_id: m for m in view.members}
    for upstream in t.upstream_transformation_ids:
        producer = by_id.get(upstream)
        if producer is not None and producer.status not in ENDED_MEMBERS:
            reasons.append(f"  waits on {producer.transformation.step}, still {producer.status}")
    return reasons


def _drain_lines(view: WorkgraphView, member: MemberView) -> list[str]:
    """The drain guard's reasons for the member (GetDrainStatus), each with what helps."""
    t = member.transformation
    held = member.holding
    problematic = InputStatus.PROBLEMATIC.value
    lines = []
    if any(r.kind == "status" and r.state == TransformationStatus.PAUSED.value for r in held):
        lines.append(
            f"  paused: its packer makes no parcels (dxts resume {t.handle or t.transformation_id})"
        )
    for r in held:
        if r.kind == "inputs" and r.state == problematic:
            lines.append(
                f"  {r.count} Problematic inputs wait for you: see dxts inputs "
                f"{t.handle or t.transformation_id} --status Problematic, then dxts inputs reset "
                "or write-off"
            )
    flying = {r.state: int(r.count) for r in held if r.kind == "parcels"}
    if flying:
        lines.append(f"  parcels in flight: {compact(flying)}")
    waiting = {r.state: int(r.count) for r in held if r.kind == "inputs" and r.state != problematic}
    if waiting:
        lines.append(f"  inputs still to process: {compact(waiting)}")
    quota = [r for r in held if r.kind == "feeder" and r.state == "Held"]
    if quota:
        lines.append(f"  its feeder {t.feeder} is {quota[0].message}")
    elif any(r.kind == "feeder" for r in held) and t.feeder:
        lines.append(
            f"  its feeder {t.feeder} is on: more inputs may come (dxts feeder show "
            f"{t.handle or t.transformation_id}; dxts drain "
            f"{view.workgraph.handle or view.workgraph.workgraph_id} stops feeding)"
        )
    return lines


def _failed_actions(member: MemberView) -> list[definition_pb2.Action]:
    return [a for a in member.actions if a.result == common_pb2.ACTION_RESULT_FAILED]


# -- parcels ------------------------------------------------------------------------------------


def parcels(
    ctx: typer.Context,
    transformation: Annotated[
        str, typer.Argument(metavar="TF", help="The member: its id, or WG/Step.")
    ],
    status: Statuses = None,
    limit: Limit = 100,
    output: OutputOption = Output.TEXT,
) -> None:
    """A member's parcels, oldest first, with their handle, status and backend (dxts parcel
    p-N for one in full)."""

    _member_items(
        ctx,
        transformation,
        status,
        limit,
        output,
        listing=Listing(Execution.ListParcels, "parcels", ParcelStatus),
        headers=("parcel", "kind", "status", "backend", "updated"),
        row=lambda p: (
            p.handle or p.parcel_id,
            name(Kind, p.kind),
            name(ParcelStatus, p.status),
            p.backend or "-",
            when(p.updated_at),
        ),
    )


def parcel(
    ctx: typer.Context,
    parcel_id: Annotated[
        str, typer.Argument(metavar="PARCEL", help="The parcel: its handle (p-10293) or id.")
    ],
    logs: Annotated[
        bool,
        typer.Option(
            "--logs",
            help="The job's stdout and stderr and its sandbox, from the backend that ran it.",
        ),
    ] = False,
    max_bytes: Annotated[
        int, typer.Option(min=0, help="With --logs: the most of each stream (0: the backend's).")
    ] = 0,
    output: OutputOption = Output.TEXT,
) -> None:
    """One parcel: its status, the backend and its identifier there, the outcome (result,
    failure reason, the backend's raw status, usage), its inputs and outputs; with --logs, the
    job's stdout, stderr and sandbox instead."""
    if logs:
        _job_logs(ctx, parcel_id, max_bytes, output)
        return

    async def body(c: Clients) -> execution_pb2.GetParcelResponse:
        found = await resolve_parcel(c, parcel_id)
        return await c.execution.GetParcel(execution_pb2.GetParcelRequest(parcel_id=found))

    got = run(ctx, body)
    if output is Output.JSON:
        print_json(message_dict(got))
        return
    p, outcome = got.parcel, got.outcome
    typer.echo(
        f"parcel {p.handle or p.parcel_id} ({p.parcel_id}): {name(Kind, p.kind)}, "
        f"{name(ParcelStatus, p.status)}"
        + (f", member {p.transformation_id}" if p.transformation_id else ", user job")
    )
    typer.echo(f"backend   {p.backend or '-'} {got.identifier or '(not dispatched)'}")
    if got.HasField("outcome"):
        result = common_pb2.OutcomeResult.Name(outcome.result).removeprefix("OUTCOME_RESULT_")
        typer.echo(f"outcome   {result.capitalize()} at {when(outcome.finished_at)}")
        failed = failure_line(outcome)
        if failed is not None:
            typer.echo(f"failure   {failed}")
        typer.echo(f"reason    {outcome.message or '-'}")
        exit_code = f" (exit code {outcome.exit_code})" if outcome.HasField("exit_code") else ""
        typer.echo(f"backend status  {outcome.backend_status or '-'}{exit_code}")
        usage = message_dict(outcome.usage) if outcome.HasField("usage") else {}
        shown = ", ".join(f"{k} {v}" for k, v in usage.items() if v not in (None, "", 0))
        typer.echo(f"usage     {shown or 'not reported'}")
    else:
        typer.echo("outcome   none yet")
    for item in got.inputs:
        typer.echo(f"input     {item.input_id} {name(InputStatus, item.status)} {item.lfn}")
    for out in got.outputs:
        typer.echo(f"output    {out.output_name} {out.lfn}")


def _job_logs(ctx: typer.Context, parcel_id: str, max_bytes: int, output: Output) -> None:

    async def body(c: Clients) -> dispatcher_pb2.GetParcelLogsResponse:
        found = await resolve_parcel(c, parcel_id)
        return await c.dispatcher.GetParcelLogs(
            dispatcher_pb2.GetParcelLogsRequest(parcel_id=found, max_bytes=max_bytes)
        )

    got = run(ctx, body)
    if output is Output.JSON:
        print_json(message_dict(got))
        return
    found = got.logs
    typer.echo(f"parcel {got.parcel_id}: backend {got.backend} {got.identifier}")
    typer.echo(f"sandbox   {found.sandbox or '-'}")
    if found.truncated:
        typer.echo("(the end of each stream only: --max-bytes for more)")
    for stream, text in (("stdout", found.stdout), ("stderr", found.stderr)):
        typer.echo(f"-- {stream} " + ("(empty)" if not text else ""))
        if text:
            typer.echo(text.rstrip("\n"))


# -- inputs list --------------------------------------------------------------------------------


class ListByDefault(TyperGroup):
    """`dxts inputs TF` lists the inputs: an argument that names no sub-verb runs `list`."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["list", *args]
        return super().resolve_command(ctx, args)


def list_inputs(
    ctx: typer.Context,
    transformation: Annotated[
        str, typer.Argument(metavar="TF", help="The member: its id, or WG/Step.")
    ],
    status: Statuses = None,
    limit: Limit = 100,
    output: OutputOption = Output.TEXT,
) -> None:
    """A member's inputs in feed order, with their status, error count and last parcel."""

    _member_items(
        ctx,
        transformation,
        status,
        limit,
        output,
        listing=Listing(Execution.ListInputs, "inputs", InputStatus),
        headers=("input", "status", "errors", "last parcel", "lfn"),
        row=lambda i: (
            i.input_id,
            name(InputStatus, i.status),
            str(i.error_count),
            i.last_parcel_id or "-",
            i.lfn or "-",
        ),
    )


@dataclass(frozen=True)
class Listing:
    """One of execution's paged List calls of a member's items, filtered by status."""

    rpc: Callable[..., object]
    field: str
    statuses: type[StrEnum]


def _member_items(
    ctx: typer.Context,
    transformation: str,
    status: list[str] | None,
    limit: int,
    output: Output,
    *,
    listing: Listing,
    headers: tuple[str, ...],
    row: Callable[[Any], tuple[str, ...]],
) -> None:
    """List a member's parcels or inputs (up to `limit`): a table (id and status never cut)
    and their count, or JSON."""

    async def body(clients: Clients) -> list[Any]:
        request = request_type(listing.rpc)(
            transformation_id=await member_id(clients, transformation),
            statuses=[parse_enum(listing.statuses, s, field="--status") for s in status or []],
        )
        return await _pages(
            method_on(clients.execution, listing.rpc), request, listing.field, limit
        )

    found = run(ctx, body)
    if output is Output.JSON:
        print_json([message_dict(item) for item in found])
        return
    rows = table(*headers, whole=(0, headers.index("status")))
    for item in found:
        rows.add_row(*row(item))
    console.print(rows)
    more = f" (at most {limit})" if len(found) >= limit else ""
    typer.echo(f"{len(found)} {listing.field}{more}")


async def _pages(call: Any, request: Any, field: str, limit: int) -> list[Any]:
    """Up to `limit` items of a paged List call."""
    found: list[Any] = []
    while len(found) < limit:
        request.paging.page_size = min(limit - len(found), 500)
        page = await call(request)
        found.extend(getattr(page, field))
        if not page.next_page_token:
            break
        request.paging.page_token = page.next_page_token
    return found[:limit]
