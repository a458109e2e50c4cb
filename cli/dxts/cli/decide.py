"""`dxts inputs decide`: an operator decides one Failed input in its HandleFailedInput hook's
place — retry it (for another backend, or asking more), write it off, or split it — with a
reason (docs/operating.md, "Deciding a Failed input by hand")."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from dxts.cli.client import Clients, request_id, run
from dxts.cli.names import member_id
from dxts.cli.output import Output, OutputOption, message_dict, name, print_json
from dxts.core.errors import InvalidArgument
from dxts.core.states import InputStatus
from dxts.v1 import execution_pb2


class Choice(StrEnum):
    RETRY = "retry"
    WRITE_OFF = "write-off"
    SPLIT = "split"


def _children(text: str) -> str:
    """--children as given, or the content of the file it names after `@`."""
    if not text.startswith("@"):
        return text
    path = Path(text[1:])
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidArgument(f"cannot read {path}: {error}", field="--children") from None


def request_of(choice: Choice, backend: str, requirements: str, children: str) -> dict[str, Any]:
    """The request's decision field, refusing options the decision does not take."""
    given = {"--backend": backend, "--requirements": requirements, "--children": children}
    takes = {
        Choice.RETRY: {"--backend", "--requirements"},
        Choice.SPLIT: {"--children"},
        Choice.WRITE_OFF: set(),
    }[choice]
    for option, value in given.items():
        if value and option not in takes:
            raise InvalidArgument(f"{choice.value} does not take {option}", field=option)
    if choice is Choice.RETRY:
        return {
            "retry": execution_pb2.RetryDecision(backend=backend, requirements_json=requirements)
        }
    if choice is Choice.SPLIT:
        if not children:
            raise InvalidArgument(
                "split needs --children (a JSON list, or @FILE)", field="--children"
            )
        return {"split": execution_pb2.SplitDecision(children_json=_children(children))}
    return {"write_off": execution_pb2.WriteOffDecision()}


def _line(reply: Any, input_id: str) -> str:
    status = name(InputStatus, reply.status)
    made = list(reply.child_input_ids)
    if made:
        return f"input {input_id} {status}: {len(made)} children, " + ", ".join(made)
    return f"input {input_id} {status}"


def inputs_decide(
    ctx: typer.Context,
    transformation: Annotated[
        str, typer.Argument(metavar="TF", help="The member: its id, or WG/Step.")
    ],
    input_id: Annotated[str, typer.Argument(metavar="INPUT", help="The Failed input's id.")],
    choice: Annotated[
        Choice, typer.Argument(metavar="DECISION", help="retry, write-off or split.")
    ],
    reason: Annotated[
        str, typer.Option(help="Why (required): recorded in the log with your name.")
    ] = "",
    backend: Annotated[str, typer.Option(help="retry: its next parcel goes to this backend.")] = "",
    requirements: Annotated[
        str,
        typer.Option(help='retry: a JSON object its next parcel asks for ({"memory_mb": 4000}).'),
    ] = "",
    children: Annotated[
        str,
        typer.Option(
            help='split: a JSON list of children ([{"lfn": ..., "lfn_size": ..., "descriptor": '
            "{...}}]), or @FILE holding one."
        ),
    ] = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Decide a Failed input in its hook's place: retry, write-off or split (with --reason)."""

    async def call(c: Clients) -> Any:
        request = execution_pb2.DecideFailedInputRequest(
            request_id=request_id(),
            transformation_id=await member_id(c, transformation),
            input_id=input_id,
            reason=reason,
            **request_of(choice, backend, requirements, children),
        )
        return await c.execution.DecideFailedInput(request)

    reply = run(ctx, call)
    if output is Output.JSON:
        print_json(message_dict(reply))
    else:
        typer.echo(_line(reply, input_id))
