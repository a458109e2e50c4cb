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

from dxts.cli import attention
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
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Also the normal states: statuses, feeders still on, work in flight, members "
            "waiting on others.",
        ),
    ] = False,
    output: OutputOption = Output.TEXT,
) -> None:
    """What holds a workgraph or a member now, in plain words, with the command that helps.

    First what needs attention (Problematic inputs, too many failed parcels quoting the latest
    failure, no progress, lost parcels, a failed check), then what holds it on purpose (not
    started, a sign-off waited for, a paused member); with --all, then the normal states (a
    feeder still on, parcels in flight, inputs to process, members waiting on another).
    """

    async def body(clients: Clients) -> tuple[str, list[str]]:
        kind, found = await entity(clients, target)
        if kind == "workgraph":
            view = await gather(clients, found, actions=True, drain=True)
            return view.workgraph.workgraph_id, workgraph_reasons(view, everything=all_)
        got = await clients.definition.GetTransformation(
            definition_pb2.GetTransformationRequest(transformation_id=found)
        )
        member = got.transformation
        if not member.workgraph_id:
            standalone = f"standalone {name(Kind, member.kind)} transformation"
            return found, [*map(attention.line, member.attention), standalone]
        view = await gather(clients, member.workgraph_id, actions=True, drain=True)
        chosen = [m for m in view.members if m.transformation.transformation_id == found]
        if not chosen:
            return found, []
        return found, [
            *map(attention.line, chosen[0].transformation.attention),
            *_said(member_lines(view, chosen[0]), everything=all_),
        ] or [_quiet(member.handle or f"{member.step} ({found})", chosen[0].status)]

    subject, reasons = run(ctx, body)
    if output is Output.JSON:
        print_json({"id": subject, "reasons": reasons})
        return
    for reason in reasons or ["nothing holds it"]:
        typer.echo(reason)


# A line of `why` is a hold (someone must act, or chose to stop it) or a normal state (shown
# with --all only).
HOLD, NORMAL = False, True
# A feeder held back by a quota (the drain guard's reason of kind "feeder" in this state): a
# hold, said without --all.
QUOTA_HELD = "Held"
# The feeder that takes another member's outputs (`dxts.cwl.compile.EDGE_FEEDER`).
EDGE_FEEDER = "Edge"


def _said(lines: list[tuple[bool, str]], *, everything: bool) -> list[str]:
    return [text for normal, text in lines if everything or not normal]


def _quiet(who: str, status: str) -> str:
    return f"nothing needs attention: {who} is {status} (dxts why --all: what it is doing)"


def workgraph_reasons(view: WorkgraphView, *, everything: bool = True) -> list[str]:
    """What needs attention first, then what holds the workgraph and each member; with
    `everything`, the statuses and normal states too."""
    w = view.workgraph
    lines: list[tuple[bool, str]] = [
        (
            NORMAL,
            f"workgraph {w.handle or w.workgraph_id} is {view.status.value}" + _halted(w.halted),
        )
    ]
    lines.extend((HOLD, reason) for reason in _own_reasons(view))
    for member in view.members:
        lines.extend(member_lines(view, member))
    reasons = [*map(attention.line, w.attention), *_said(lines, everything=everything)]
    return reasons or [_quiet(f"workgraph {w.handle or w.workgraph_id}", view.status.value)]


def _halted(halted: bool) -> str:
    return " (halted)" if halted else ""


def holding(view: WorkgraphView) -> list[str]:
    """The reasons without the statuses (what `show` prints under its table, which has them)."""
    return [
        *_own_reasons(view),
        *(
            f"{member.transformation.step}: {line.strip()}"
            for member in view.members
            for _, line in member_lines(view, member)[1:]
        ),
    ]


def _own_reasons(view: WorkgraphView) -> list[str]:
    """What holds the workgraph itself: not started, a pending approving step (a failed one is
    an attention item)."""
    w = view.workgraph
    status = view.status
    reasons = []
    if status is WorkgraphStatus.NEW:
        reasons.append(f"it has not been started: dxts start {w.handle or w.workgraph_id}")
    for action in view.approving:
        if action.result == common_pb2.ACTION_RESULT_PENDING and status in (
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
    """Every line `why --all` says of the member, its status first."""
    return [text for _, text in member_lines(view, member)]


def member_lines(view: WorkgraphView, member: MemberView) -> list[tuple[bool, str]]:
    """The member's status (normal), then what holds it and its normal states, each marked."""
    t = member.transformation
    who = t.handle or f"{t.step} ({t.transformation_id})"
    lines: list[tuple[bool, str]] = [(NORMAL, f"{who} is {member.status}")]
    if member.status in ENDED_MEMBERS:
        return lines
    lines.extend(_drain_lines(view, member))
    by_id = {m.transformation.transformation_id: m for m in view.members}
    for upstream in t.upstream_transformation_ids:
        producer = by_id.get(upstream)
        if producer is not None and producer.status not in ENDED_MEMBERS:
            lines.append(
                (NORMAL, f"  waits on {producer.transformation.step}, still {producer.status}")
            )
    return lines


def _drain_lines(view: WorkgraphView, member: MemberView) -> list[tuple[bool, str]]:
    """The drain guard's reasons for the member (GetDrainStatus), each with what helps; its
    Problematic inputs are an attention item, not repeated here."""
    t = member.transformation
    held = member.holding
    problematic = InputStatus.PROBLEMATIC.value
    lines: list[tuple[bool, str]] = []
    if any(r.kind == "status" and r.state == TransformationStatus.PAUSED.value for r in held):
        lines.append(
            (
                HOLD,
                f"  paused: its packer makes no parcels (dxts resume "
                f"{t.handle or t.transformation_id})",
            )
        )
    flying = {r.state: int(r.count) for r in held if r.kind == "parcels"}
    if flying:
        lines.append((NORMAL, f"  parcels in flight: {compact(flying)}"))
    waiting = {r.state: int(r.count) for r in held if r.kind == "inputs" and r.state != problematic}
    if waiting:
        lines.append((NORMAL, f"  inputs still to process: {compact(waiting)}"))
    quota = [r for r in held if r.kind == "feeder" and r.state == QUOTA_HELD]
    if quota:
        lines.append((HOLD, f"  its feeder {t.feeder} is {quota[0].message}"))
    elif any(r.kind == "feeder" for r in held) and t.feeder:
        lines.append((NORMAL, _feeder_line(view, member)))
    return lines


def _feeder_line(view: WorkgraphView, member: MemberView) -> str:
    """Why its feeder is still on: an Edge feeder takes its producer's outputs until the producer
    has ended (`drain` turns off only the outermost feeders); any other may yield more."""
    t = member.transformation
    if t.feeder == EDGE_FEEDER:
        producers = [
            m.transformation.step
            for m in view.members
            if m.transformation.transformation_id in t.upstream_transformation_ids
        ]
        return (
            f"  it takes the outputs of {', '.join(producers) or 'its producer'} as they come: "
            "its feeder ends once that has ended"
        )
    return (
        f"  its feeder {t.feeder} is on: more inputs may come (dxts feeder show "
        f"{t.handle or t.transformation_id}; dxts drain "
        f"{view.workgraph.handle or view.workgraph.workgraph_id} stops feeding)"
    )


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
