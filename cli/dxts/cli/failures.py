"""What is failing, where and why: `dxts errors [WG|STEP]`, and the one-line account of a
failure that `dxts parcel` and `dxts logs` print first.

`errors` asks ExecutionService.GroupFailures for the members named (a workgraph's, one member,
or, with no argument, every member the caller's VO has): failures alike (same class, backend,
site, and message once numbers, ids and paths are folded) are one row, the largest first.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from dxts.cli.client import Clients, run
from dxts.cli.names import entity
from dxts.cli.output import Output, OutputOption, message_dict, print_json, when
from dxts.core.adaptor.model import FailureClass
from dxts.core.errors import InvalidArgument
from dxts.v1 import common_pb2, definition_pb2, execution_pb2

# How many transformations one GroupFailures call names (the contract's bound).
IDS_PER_CALL = 500
DURATION = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def class_name(number: int) -> str:
    """A failure class as people read it: `application-error` (the contract's names are the
    model's; a number it does not know reads unclassified)."""
    known = number in common_pb2.FailureClass.values()
    name = common_pb2.FailureClass.Name(number) if known else "FAILURE_CLASS_UNSPECIFIED"  # type: ignore[arg-type]
    return FailureClass[name.removeprefix("FAILURE_CLASS_")].value


def failure_line(outcome: common_pb2.Outcome) -> str | None:
    """`application-error (exit code 3): ERROR: …`: the class, the exit code, and the tool's
    own words (else where staging failed); None for an outcome that carries no failure."""
    if not outcome.HasField("failure"):
        return None
    failure = outcome.failure
    said = class_name(failure.failure_class)
    if outcome.HasField("exit_code"):
        said += f" (exit code {outcome.exit_code})"
    where = " at ".join(part for part in (failure.lfn, failure.storage_element) if part)
    words = failure.tool_message or where
    site = f" [{failure.site}]" if failure.site else ""
    return f"{said}{site}: {words}" if words else f"{said}{site}"


def failing_lines(groups: list[execution_pb2.FailureGroup], shown: int = 3) -> list[str]:
    """The largest failure groups in a line each (`12 failed: application-error (exit code 3):
    ERROR: …`), and how to see them all."""
    lines = []
    for found in groups[:shown]:
        codes = ",".join(str(c) for c in found.exit_codes)
        said = class_name(found.failure_class) + (f" (exit code {codes})" if codes else "")
        lines.append(f"{found.count} failed: {said} on {found.backend}: {found.message}")
    if len(groups) > shown:
        lines.append(f"... and {len(groups) - shown} more kinds of failure: dxts errors")
    return lines


def parse_since(text: str | None) -> datetime | None:
    """`--since 1h` (s, m, h or d) as the moment that long ago."""
    if not text:
        return None
    found = DURATION.match(text.strip())
    if found is None:
        raise InvalidArgument(
            f"--since {text!r}: a number and a unit, s, m, h or d (e.g. 30m, 1h, 2d)",
            field="--since",
        )
    return datetime.now(UTC) - timedelta(**{UNITS[found[2]]: int(found[1])})


async def member_ids(clients: Clients, name: str | None) -> list[str]:
    """The transformations named: one member, a workgraph's members, or (None) every one the
    caller's VO has."""
    request = definition_pb2.ListTransformationsRequest(without_attention=True)
    if name is not None:
        kind, found = await entity(clients, name)
        if kind == "transformation":
            return [found]
        request.workgraph_id = found
    ids: list[str] = []
    while True:
        page = await clients.definition.ListTransformations(request)
        ids.extend(t.transformation_id for t in page.transformations)
        if not page.next_page_token:
            return ids
        request.paging.page_token = page.next_page_token


async def grouped(
    clients: Clients, ids: list[str], since: datetime | None, examples: int = 0
) -> list[execution_pb2.FailureGroup]:
    """GroupFailures over `ids` (in calls of at most IDS_PER_CALL), the largest group first."""
    groups: list[execution_pb2.FailureGroup] = []
    for start in range(0, len(ids), IDS_PER_CALL):
        request = execution_pb2.GroupFailuresRequest(
            transformation_ids=ids[start : start + IDS_PER_CALL], examples=examples
        )
        if since is not None:
            request.since.FromDatetime(since)
        groups.extend((await clients.execution.GroupFailures(request)).groups)
    return sorted(groups, key=lambda g: -g.count)


def errors(
    ctx: typer.Context,
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="[WG|STEP]",
            help="A workgraph or a member (id or WG/Step); none: every member of your VO.",
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only failures this recent: 30m, 1h, 2d.")
    ] = None,
    examples: Annotated[
        int, typer.Option(min=1, max=10, help="Example parcels (and inputs) per row.")
    ] = 3,
    output: OutputOption = Output.TEXT,
) -> None:
    """Failures grouped by class, backend, site and message (numbers, ids and paths folded),
    the largest group first: how many, when first and last seen, the latest one's own words,
    example parcels and their inputs."""

    async def body(clients: Clients) -> list[execution_pb2.FailureGroup]:
        moment = parse_since(since)
        return await grouped(clients, await member_ids(clients, name), moment, examples)

    groups = run(ctx, body)
    if output is Output.JSON:
        print_json(
            [
                message_dict(g) | {"failure_class": class_name(g.failure_class), "count": g.count}
                for g in groups
            ]
        )
        return
    if not groups:
        typer.echo("no failures" + (f" in the last {since}" if since else ""))
        return
    for found in groups:
        codes = ",".join(str(c) for c in found.exit_codes)
        said = class_name(found.failure_class) + (f" (exit code {codes})" if codes else "")
        where = found.backend + (f" at {found.site}" if found.site else "")
        typer.echo(f"{found.count} failed  {said}  on {where}")
        typer.echo(f"  {found.message}")
        typer.echo(f"  last {when(found.last_seen)}, first {when(found.first_seen)}")
        inputs = ", ".join(found.example_input_ids)
        typer.echo(
            "  e.g. parcels "
            + ", ".join(_handles_or_ids(found))
            + (f" (inputs {inputs})" if inputs else "")
        )


def _handles_or_ids(found: execution_pb2.FailureGroup) -> list[str]:
    """The example parcels by handle (p-10293), by id where the service gave none."""
    handles = list(found.example_parcel_handles)
    return [
        (handles[i] if i < len(handles) else "") or parcel
        for i, parcel in enumerate(found.example_parcel_ids)
    ]
