"""Operator verbs: steering workgraphs and transformations (STATE-MACHINES.md), the feeders,
and the inputs an operator resets or writes off. Each prints the entity as it is afterwards,
on one line (or, with --output json, the service's answer)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from dxts.cli.client import Clients, request_id, run
from dxts.cli.output import Output, OutputOption, message_dict, name, parse_enum, print_json
from dxts.core.errors import InvalidArgument
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.states import ActionResult, InputStatus, TransformationStatus, WorkgraphStatus
from dxts.v1 import definition_pb2, execution_pb2

WG = Annotated[str, typer.Argument(metavar="WG", help="The workgraph id.")]
TF = Annotated[str, typer.Argument(metavar="TF", help="The transformation id.")]
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


def _steer(ctx: typer.Context, rpc: str, *, output: Output, **fields: str) -> None:
    """A steering verb: definition's `rpc` with its `<rpc>Request` of `fields` (a workgraph
    or a transformation id, and the reason) and a fresh request id; prints the entity."""
    request = getattr(pb, f"{rpc}Request")(request_id=request_id(), **fields)
    line = _workgraph if "workgraph_id" in fields else _transformation
    _report(ctx, lambda c: getattr(c.definition, rpc)(request), output, line)


def _workgraph(reply: Any) -> str:
    w = reply.workgraph
    return f"{w.workgraph_id} {name(WorkgraphStatus, w.status)}" + (" (halted)" if w.halted else "")


def _transformation(reply: Any) -> str:
    t = reply.transformation
    feeder = "on" if t.feeder_enabled else "off"
    return f"{t.transformation_id} {name(TransformationStatus, t.status)}, feeder {feeder}"


def _action(reply: Any) -> str:
    a = reply.action
    return f"action #{a.action_id} {a.action}: {name(ActionResult, a.result)}"


# -- workgraphs ---------------------------------------------------------------------------------


def start(
    ctx: typer.Context, workgraph_id: WG, reason: Reason = "", output: OutputOption = Output.TEXT
) -> None:
    """Start a New workgraph (Scouting when it scouts, else Active)."""
    _steer(ctx, "StartWorkgraph", workgraph_id=workgraph_id, reason=reason, output=output)


def drain(
    ctx: typer.Context, workgraph_id: WG, reason: Reason = "", output: OutputOption = Output.TEXT
) -> None:
    """Stop feeding new inputs and let the work in flight finish; it then completes."""
    _steer(ctx, "DrainWorkgraph", workgraph_id=workgraph_id, reason=reason, output=output)


def halt(
    ctx: typer.Context, workgraph_id: WG, reason: Reason = "", output: OutputOption = Output.TEXT
) -> None:
    """Stop everything: cancel the parcels in flight and write off every waiting input."""
    _steer(ctx, "HaltWorkgraph", workgraph_id=workgraph_id, reason=reason, output=output)


def cancel(
    ctx: typer.Context, workgraph_id: WG, reason: Reason = "", output: OutputOption = Output.TEXT
) -> None:
    """Cancel a workgraph: its members clean up (outputs removed) and end Cancelled."""
    _steer(ctx, "CancelWorkgraph", workgraph_id=workgraph_id, reason=reason, output=output)


def extend_scout(
    ctx: typer.Context,
    workgraph_id: WG,
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
            args[member] = _json_object(text, "--feeder-args")
        return await c.definition.ExtendScout(
            pb.ExtendScoutRequest(
                request_id=request_id(),
                workgraph_id=workgraph_id,
                reason=reason,
                feeder_args_json=args,
            )
        )

    _report(ctx, call, output, _workgraph)


def return_to_active(
    ctx: typer.Context,
    workgraph_id: WG,
    clear_bookmarks: Annotated[
        bool, typer.Option(help="Feeders re-read from the beginning.")
    ] = False,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Back from Finalizing to Active, after a failed finalisation."""
    _report(
        ctx,
        lambda c: c.definition.ReturnToActive(
            pb.ReturnToActiveRequest(
                request_id=request_id(),
                workgraph_id=workgraph_id,
                reason=reason,
                clear_bookmarks=clear_bookmarks,
            )
        ),
        output,
        _workgraph,
    )


# -- transformations ----------------------------------------------------------------------------


def pause(
    ctx: typer.Context,
    transformation_id: TF,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Pause a member: its packer stops; in-flight work finishes."""
    _steer(
        ctx,
        "PauseTransformation",
        transformation_id=transformation_id,
        reason=reason,
        output=output,
    )


def resume(
    ctx: typer.Context,
    transformation_id: TF,
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Resume a paused member."""
    _steer(
        ctx,
        "ResumeTransformation",
        transformation_id=transformation_id,
        reason=reason,
        output=output,
    )


def flush(ctx: typer.Context, transformation_id: TF, reason: Reason = "") -> None:
    """Ask the packer to pack what it holds back as too small, once."""
    run(
        ctx,
        lambda c: c.definition.FlushTransformation(
            pb.FlushTransformationRequest(
                request_id=request_id(), transformation_id=transformation_id, reason=reason
            )
        ),
    )
    typer.echo(f"{transformation_id} flush requested")


# -- actions ------------------------------------------------------------------------------------

FORCEABLE = {
    "passed": ActionResult.PASSED,
    "done": ActionResult.DONE,
    "failed": ActionResult.FAILED,
}


def force(
    ctx: typer.Context,
    action_id: Annotated[int, typer.Argument(metavar="ACTION", help="The action id (dxts show).")],
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
                action_id=action_id,
                result=enum_to_proto(chosen),  # type: ignore[arg-type]
                message=message,
            )
        )

    _report(ctx, call, output, _action)


def reset(
    ctx: typer.Context,
    action_id: Annotated[int, typer.Argument(metavar="ACTION", help="The action id (dxts show).")],
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Clear an action's result so that it runs again."""
    _report(
        ctx,
        lambda c: c.definition.ResetAction(
            pb.ResetActionRequest(request_id=request_id(), action_id=action_id, reason=reason)
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
    enabled: bool | None = None,
    args: str = "",
    reason: str = "",
) -> None:
    async def call(c: Clients) -> Any:
        request = pb.SetFeederRequest(
            request_id=request_id(),
            transformation_id=transformation_id,
            feeder_args_json=_json_object(args, "ARGS") if args else "",
            reason=reason,
        )
        if enabled is not None:
            request.enabled = enabled
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
    args: Annotated[str, typer.Argument(metavar="ARGS", help="The new arguments, a JSON object.")],
    reason: Reason = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Replace the feeder's arguments (checked against the feeder's own model)."""
    _set_feeder(ctx, transformation_id, output, args=args, reason=reason)


def _json_object(text: str, field: str) -> str:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise InvalidArgument(f"not JSON: {error}", field=field) from None
    if not isinstance(value, dict):
        raise InvalidArgument("not a JSON object", field=field)
    return json.dumps(value)


# -- inputs -------------------------------------------------------------------------------------

inputs_app = typer.Typer(no_args_is_help=True, help="A member's inputs: reset, write off.")

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
        "ResetInputs",
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
        "WriteOffInputs",
        transformation_id,
        ids,
        status,
        reason,
        output,
        lambda reply: f"{reply.written_off_count} inputs written off",
    )


def _select_inputs(
    ctx: typer.Context,
    rpc: str,
    transformation_id: str,
    ids: list[str] | None,
    statuses: list[str] | None,
    reason: str,
    output: Output,
    line: Callable[[Any], str],
) -> None:
    """An operation on a selection of one transformation's inputs: execution's `rpc` (a bad
    selection is reported by `run` like the service's own errors)."""

    def call(c: Clients) -> Awaitable[Any]:
        request = getattr(execution_pb2, f"{rpc}Request")(
            request_id=request_id(),
            transformation_id=transformation_id,
            selection=_selection(ids, statuses),
            reason=reason,
        )
        return getattr(c.execution, rpc)(request)

    _report(ctx, call, output, line)
