"""Operator verbs: steering workgraphs and transformations (docs/operating.md), the feeders,
and the inputs an operator resets, writes off or decides (`decide`). Each prints the entity as
it is afterwards, on one line (or, with --output json, the service's answer)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from dxts.cli.client import EXIT_FAILED, Clients, fail_line, request_id, run
from dxts.cli.decide import inputs_decide
from dxts.cli.inspect import ListByDefault, list_inputs
from dxts.cli.names import action_number, member_id, workgraph_id
from dxts.cli.output import Output, OutputOption, message_dict, name, parse_enum, print_json
from dxts.core.errors import InvalidArgument
from dxts.core.grpc.calls import method_on, request_type
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.states import ActionResult, InputStatus, TransformationStatus, WorkgraphStatus
from dxts.v1 import definition_pb2, execution_pb2
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer as Definition
from dxts.v1.execution_pb2_grpc import ExecutionServiceServicer as Execution

WG = Annotated[str, typer.Argument(metavar="WG", help="The workgraph id.")]
TF = Annotated[
    str, typer.Argument(metavar="TF", help="The member: its transformation id, or WG/Step.")
]
Reason = Annotated[str, typer.Option(help="Recorded in the log with your name.")]

pb = definition_pb2


def _report(
    ctx: typer.Context,
    call: Callable[[Clients], Awaitable[Any]],
    output: Output,
    line: Callable[[Any], str],
) -> None:
    reply = run(ctx, call)
    if output is Output.JSON:
        print_json(message_dict(reply))
    else:
        typer.echo(line(reply))


def _steer(
    ctx: typer.Context,
    rpc: Callable[..., object],
    *,
    output: Output,
    reason: str,
    workgraph: str | None = None,
    member: str | None = None,
) -> None:
    """A steering verb: definition's `rpc` with its `<rpc>Request` for a workgraph or a member
    (named as the operator typed it), the reason and a fresh request id; prints the entity."""

    async def call(c: Clients) -> Any:
        if workgraph is not None:
            target = {"workgraph_id": await workgraph_id(c, workgraph)}
        else:
            target = {"transformation_id": await member_id(c, member or "")}
        request = request_type(rpc)(request_id=request_id(), reason=reason, **target)
        return await method_on(c.definition, rpc)(request)

    entity_line = _workgraph if workgraph is not None else _transformation
    _report(ctx, call, output, lambda reply: f"{entity_line(reply)}: {IN_MOTION[rpc]}")


# What each steering verb sets in motion, said after the entity's new state.
IN_MOTION = {
    Definition.StartWorkgraph: "started; its feeders read inputs and its packers make parcels",
    Definition.DrainWorkgraph: "draining; feeders are off, the work in flight finishes, "
    "then it completes",
    Definition.HaltWorkgraph: "halted; parcels in flight are being cancelled and waiting inputs "
    "written off",
    Definition.CancelWorkgraph: "cancelling; its members remove their outputs, then end Cancelled",
    Definition.PauseTransformation: "paused; no new parcels, those in flight finish (dxts resume)",
    Definition.ResumeTransformation: "resumed; its packer makes parcels again",
}


def _workgraph(reply: Any) -> str:
    w = reply.workgraph
    halted = " (halted)" if w.halted else ""
    return f"{w.handle or w.workgraph_id} {name(WorkgraphStatus, w.status)}{halted}"


def _transformation(reply: Any) -> str:
    t = reply.transformation
    feeder = "on" if t.feeder_enabled else "off"
    status = name(TransformationStatus, t.status)
    return f"{t.handle or t.transformation_id} {status}, feeder {feeder}"


def _action(reply: Any) -> str:
    a = reply.action
    return f"action #{a.action_id} {a.action}: {name(ActionResult, a.result)}"


# -- workgraphs ---------------------------------------------------------------------------------


def start(
    ctx: typer.Context, workgraph_id: WG, reason: Reason = "", output: OutputOption = Output.TEXT
) -> None:
    """Start a New workgraph (Scouting when it scouts, else Active)."""
    _steer(ctx, Definition.StartWorkgraph, workgraph=workgraph_id, reason=reason, output=output)


def drain(
    ctx: typer.Context, workgraph_id: WG, reason: Reason = "", output: OutputOption = Output.TEXT
) -> None:
    """Stop feeding new inputs and let the work in flight finish; it then completes."""
    _steer(ctx, Definition.DrainWorkgraph, workgraph=workgraph_id, reason=reason, output=output)


def halt(
    ctx: typer.Context, workgraph_id: WG, reason: Reason = "", output: OutputOption = Output.TEXT
) -> None:
    """Stop everything: cancel the parcels in flight and write off every waiting input."""
    _steer(ctx, Definition.HaltWorkgraph, workgraph=workgraph_id, reason=reason, output=output)


def cancel(
    ctx: typer.Context, workgraph_id: WG, reason: Reason = "", output: OutputOption = Output.TEXT
) -> None:
    """Cancel a workgraph: its members clean up (outputs removed) and end Cancelled."""
    _steer(ctx, Definition.CancelWorkgraph, workgraph=workgraph_id, reason=reason, output=output)


def extend_scout(
    ctx: typer.Context,
    workgraph: WG,
    feeder_args: Annotated[
        list[str] | None,
        typer.Option(
            "--feeder-args", help="TF=JSON: new feeder arguments for a member; repeatable."
        ),
    ] = None,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Back from Approving (or ApprovingBlocked) to Scouting: scout further."""

    async def call(c: Clients) -> Any:
        args: dict[str, str] = {}
        for pair in feeder_args or []:
            member, separator, text = pair.partition("=")
            if not separator:
                raise InvalidArgument(f"{pair!r} is not TF=JSON", field="--feeder-args")
            args[await member_id(c, member, field="--feeder-args")] = _json_object(
                text, "--feeder-args"
            )
        return await c.definition.ExtendScout(
            pb.ExtendScoutRequest(
                request_id=request_id(),
                workgraph_id=await workgraph_id(c, workgraph),
                reason=reason,
                feeder_args_json=args,
            )
        )

    _report(ctx, call, output, _workgraph)


def return_to_active(
    ctx: typer.Context,
    workgraph: WG,
    clear_bookmarks: Annotated[
        bool, typer.Option(help="Feeders re-read from the beginning.")
    ] = False,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Back from Finalizing to Active, after a failed finalisation."""

    async def call(c: Clients) -> Any:
        return await c.definition.ReturnToActive(
            pb.ReturnToActiveRequest(
                request_id=request_id(),
                workgraph_id=await workgraph_id(c, workgraph),
                reason=reason,
                clear_bookmarks=clear_bookmarks,
            )
        )

    _report(ctx, call, output, _workgraph)


# -- transformations ----------------------------------------------------------------------------


def pause(
    ctx: typer.Context,
    transformation_id: TF,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Pause a member: its packer stops; in-flight work finishes."""
    _steer(
        ctx, Definition.PauseTransformation, member=transformation_id, reason=reason, output=output
    )


def resume(
    ctx: typer.Context,
    transformation_id: TF,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Resume a paused member."""
    _steer(
        ctx, Definition.ResumeTransformation, member=transformation_id, reason=reason, output=output
    )


def flush(
    ctx: typer.Context,
    transformation_id: TF,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Run the packer once to pack what it holds back as too small; what it made, or why it
    failed (exit 1)."""

    async def call(c: Clients) -> tuple[str, pb.FlushTransformationResponse]:
        member = await member_id(c, transformation_id)
        reply = await c.definition.FlushTransformation(
            pb.FlushTransformationRequest(
                request_id=request_id(), transformation_id=member, reason=reason
            )
        )
        return member, reply

    member, reply = run(ctx, call)
    if output is Output.JSON:
        print_json({"transformation_id": member, **message_dict(reply)})
    elif not reply.failure:
        typer.echo(f"{member} flushed: {flush_summary(reply)}")
    if reply.failure:
        made = f" ({flush_summary(reply)} before it stopped)" if reply.parcels_created else ""
        fail_line(
            f"error: {member} flush failed: its packer stopped ({reply.failure_class}): "
            f"{reply.failure}{made}; dxts why {member}"
        )
        raise typer.Exit(EXIT_FAILED)


def flush_summary(reply: pb.FlushTransformationResponse) -> str:
    """'1 parcel made of 2 inputs (3 offered, 1 withheld)'."""
    parts = [f"{reply.inputs_offered} offered"]
    if reply.inputs_delayed:
        parts.append(f"{reply.inputs_delayed} withheld")
    if reply.inputs_problematic:
        parts.append(f"{reply.inputs_problematic} set aside")
    return (
        f"{_counted(reply.parcels_created, 'parcel')} made of "
        f"{_counted(reply.inputs_assigned, 'input')} ({', '.join(parts)})"
    )


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


# -- actions ------------------------------------------------------------------------------------

FORCEABLE = {
    "passed": ActionResult.PASSED,
    "done": ActionResult.DONE,
    "failed": ActionResult.FAILED,
}


def force(
    ctx: typer.Context,
    action_id: Annotated[
        str, typer.Argument(metavar="ACTION", help="The action's number (27, or '#27').")
    ],
    result: Annotated[str, typer.Argument(metavar="RESULT", help="passed, done or failed.")],
    message: Annotated[str, typer.Option(help="Why (kept on the action).")] = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Record an action's result yourself (a sign-off, or a check you overrule)."""

    async def call(c: Clients) -> Any:
        chosen = FORCEABLE.get(result.lower())
        if chosen is None:
            raise InvalidArgument(f"{result!r} is not passed, done or failed", field="RESULT")
        return await c.definition.ForceAction(
            pb.ForceActionRequest(
                request_id=request_id(),
                action_id=action_number(action_id),
                result=enum_to_proto(chosen),  # type: ignore[arg-type]
                message=message,
            )
        )

    _report(ctx, call, output, _action)


def reset(
    ctx: typer.Context,
    action_id: Annotated[
        str, typer.Argument(metavar="ACTION", help="The action's number (27, or '#27').")
    ],
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Clear an action's result so that it runs again."""
    _report(
        ctx,
        lambda c: c.definition.ResetAction(
            pb.ResetActionRequest(
                request_id=request_id(), action_id=action_number(action_id), reason=reason
            )
        ),
        output,
        _action,
    )


# -- feeders ------------------------------------------------------------------------------------

feeder_app = typer.Typer(no_args_is_help=True, help="A member's feeder: enable, disable, args.")


def _set_feeder(
    ctx: typer.Context,
    transformation_id: str,
    output: Output,
    *,
    enabled: bool,
    reason: str = "",
) -> None:
    async def call(c: Clients) -> Any:
        request = pb.SetFeederRequest(
            request_id=request_id(),
            transformation_id=await member_id(c, transformation_id),
            reason=reason,
            enabled=enabled,
        )
        return await c.definition.SetFeeder(request)

    _report(ctx, call, output, _transformation)


@feeder_app.command("enable")
def feeder_enable(
    ctx: typer.Context,
    transformation_id: TF,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Let the feeder yield inputs again."""
    _set_feeder(ctx, transformation_id, output, enabled=True, reason=reason)


@feeder_app.command("disable")
def feeder_disable(
    ctx: typer.Context,
    transformation_id: TF,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Stop the feeder (the member drains once its work is done)."""
    _set_feeder(ctx, transformation_id, output, enabled=False, reason=reason)


@feeder_app.command("args")
def feeder_args(
    ctx: typer.Context,
    transformation_id: TF,
    changes: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="KEY=VALUE...",
            help="The keys to change; a VALUE is read as JSON when it is JSON (4000, true, "
            '["a"]), else as text. A JSON object instead merges its keys.',
        ),
    ] = None,
    merge: Annotated[
        str, typer.Option("--merge", help="A JSON object whose keys are changed.")
    ] = "",
    replace: Annotated[
        bool, typer.Option("--replace", help="The given keys become all the arguments.")
    ] = False,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Change the named feeder arguments, keeping the others; the service checks the result
    against the feeder's own model. Prints the arguments as they are now."""

    async def call(c: Clients) -> Any:
        member = await member_id(c, transformation_id)
        wanted = _changes(changes or [], merge)
        current: dict[str, Any] = {}
        if not replace:
            got = await c.definition.GetTransformation(
                pb.GetTransformationRequest(transformation_id=member)
            )
            current = json.loads(got.transformation.feeder_args_json or "{}")
        return await c.definition.SetFeeder(
            pb.SetFeederRequest(
                request_id=request_id(),
                transformation_id=member,
                feeder_args_json=json.dumps({**current, **wanted}),
                reason=reason,
            )
        )

    _report(ctx, call, output, _feeder_line)


def _changes(pairs: list[str], merge: str) -> dict[str, Any]:
    """KEY=VALUE pairs (or JSON objects) and --merge as one mapping of the keys to change."""
    found: dict[str, Any] = json.loads(_json_object(merge, "--merge")) if merge else {}
    for pair in pairs:
        if pair.lstrip().startswith("{"):
            found.update(json.loads(_json_object(pair, "KEY=VALUE")))
            continue
        key, separator, text = pair.partition("=")
        if not separator or not key:
            raise InvalidArgument(f"{pair!r} is not KEY=VALUE", field="KEY=VALUE")
        try:
            found[key] = json.loads(text)
        except ValueError:
            found[key] = text
    if not found:
        raise InvalidArgument("give KEY=VALUE pairs or --merge JSON", field="KEY=VALUE")
    return found


def _feeder_line(reply: Any) -> str:
    t = reply.transformation
    return f"{_transformation(reply)}; feeder {t.feeder} args {t.feeder_args_json or '{}'}"


@feeder_app.command("show")
def feeder_show(
    ctx: typer.Context, transformation_id: TF, output: OutputOption = Output.TEXT
) -> None:
    """The feeder of a member: its name, on/off, its arguments and its bookmark (how far it
    has read)."""

    async def call(c: Clients) -> dict[str, Any]:
        member = await member_id(c, transformation_id)
        got = await c.definition.GetTransformation(
            pb.GetTransformationRequest(transformation_id=member)
        )
        t = got.transformation
        return {
            "transformation_id": member,
            "feeder": t.feeder,
            "enabled": t.feeder_enabled,
            "args": json.loads(t.feeder_args_json or "{}"),
            "bookmark": await _bookmark(c, member),
        }

    shown = run(ctx, call)
    if output is Output.JSON:
        print_json(shown)
        return
    typer.echo(
        f"{shown['transformation_id']} feeder {shown['feeder'] or '-'} "
        f"{'on' if shown['enabled'] else 'off'}"
    )
    typer.echo(f"args      {json.dumps(shown['args'])}")
    bookmark = shown["bookmark"]
    typer.echo(f"bookmark  {'none (not active)' if bookmark is None else json.dumps(bookmark)}")


async def _bookmark(c: Clients, member: str) -> Any:
    """The feeder's bookmark, which only the list of active members carries (None when the
    member is not active)."""
    request = pb.ListActiveTransformationsRequest()
    while True:
        page = await c.definition.ListActiveTransformations(request)
        for t in page.transformations:
            if t.transformation_id == member:
                return json.loads(t.feeder_state_json or "null")
        if not page.next_page_token:
            return None
        request.paging.page_token = page.next_page_token


def _json_object(text: str, field: str) -> str:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise InvalidArgument(f"not JSON: {error}", field=field) from None
    if not isinstance(value, dict):
        raise InvalidArgument("not a JSON object", field=field)
    return json.dumps(value)


# -- inputs -------------------------------------------------------------------------------------

inputs_app = typer.Typer(
    cls=ListByDefault,
    no_args_is_help=True,
    help="A member's inputs: list (`dxts inputs TF`), reset, write off, decide a Failed one.",
)
inputs_app.command("list")(list_inputs)
inputs_app.command("decide")(inputs_decide)

Ids = Annotated[list[str] | None, typer.Option("--id", help="An input id; repeatable.")]
Statuses = Annotated[
    list[str] | None, typer.Option("--status", "-s", help="Every input in this status; repeatable.")
]


def _selection(ids: list[str] | None, statuses: list[str] | None) -> execution_pb2.InputSelection:
    if bool(ids) == bool(statuses):
        raise InvalidArgument("give --id or --status (one of the two)", field="selection")
    return execution_pb2.InputSelection(
        input_ids=ids or [],
        statuses=[parse_enum(InputStatus, s, field="--status") for s in statuses or []],  # type: ignore[misc]
    )


@inputs_app.command("reset")
def inputs_reset(
    ctx: typer.Context,
    transformation_id: TF,
    ids: Ids = None,
    status: Statuses = None,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Problematic inputs back to Unassigned, their error count cleared."""
    _select_inputs(
        ctx,
        Execution.ResetInputs,
        transformation_id,
        ids,
        status,
        reason,
        output,
        lambda reply: f"{reply.reset_count} inputs reset",
    )


@inputs_app.command("write-off")
def inputs_write_off(
    ctx: typer.Context,
    transformation_id: TF,
    ids: Ids = None,
    status: Statuses = None,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Unassigned, Failed or Problematic inputs to NotProcessed: they will not be processed."""
    _select_inputs(
        ctx,
        Execution.WriteOffInputs,
        transformation_id,
        ids,
        status,
        reason,
        output,
        lambda reply: f"{reply.written_off_count} inputs written off",
    )


def _select_inputs(
    ctx: typer.Context,
    rpc: Callable[..., object],
    transformation_id: str,
    ids: list[str] | None,
    statuses: list[str] | None,
    reason: str,
    output: Output,
    line: Callable[[Any], str],
) -> None:
    """An operation on a selection of one transformation's inputs: execution's `rpc` (a bad
    selection is reported by `run` like the service's own errors)."""

    async def call(c: Clients) -> Any:
        request = request_type(rpc)(
            request_id=request_id(),
            transformation_id=await member_id(c, transformation_id),
            selection=_selection(ids, statuses),
            reason=reason,
        )
        return await method_on(c.execution, rpc)(request)

    _report(ctx, call, output, line)
