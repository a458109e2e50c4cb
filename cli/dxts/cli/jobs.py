"""User jobs, the process registry and provenance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from dxts.cli.client import Clients, connection_of, request_id, run
from dxts.cli.documents import bundle
from dxts.cli.names import parcel_id as resolve_parcel
from dxts.cli.output import (
    Output,
    OutputOption,
    console,
    labels,
    message_dict,
    name,
    print_json,
    table,
    when,
)
from dxts.core.errors import InvalidArgument
from dxts.core.states import InputStatus, ParcelStatus
from dxts.v1 import common_pb2, definition_pb2, execution_pb2

# -- user jobs ----------------------------------------------------------------------------------

job_app = typer.Typer(no_args_is_help=True, help="User jobs: one CWL process, one parcel.")


def _input_object(path: Path | None) -> str:
    if path is None:
        return "{}"
    try:
        value = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise InvalidArgument(f"cannot read {path}: {error}", field="--inputs") from None
    if value is not None and not isinstance(value, dict):
        raise InvalidArgument(f"{path} is not a CWL input object (a mapping)", field="--inputs")
    return json.dumps(value or {})


@job_app.command("submit")
def job_submit(
    ctx: typer.Context,
    document: Annotated[
        Path, typer.Argument(help="A CommandLineTool or Workflow (plain, or with dirac:Job).")
    ],
    inputs: Annotated[
        Path | None, typer.Option("--inputs", "-i", help="The CWL input object (YAML or JSON).")
    ] = None,
    label: Annotated[
        list[str] | None, typer.Option("--label", "-l", help="k=v; repeatable.")
    ] = None,
    output: OutputOption = Output.TEXT,
) -> None:
    """Submit a user job; prints its parcel id."""

    async def body(c: Clients) -> definition_pb2.SubmitJobResponse:
        return await c.definition.SubmitJob(
            definition_pb2.SubmitJobRequest(
                request_id=request_id(),
                bundle=bundle(document),
                inputs_json=_input_object(inputs),
                labels=labels(label),
            )
        )

    reply = run(ctx, body)
    if output is Output.JSON:
        print_json(message_dict(reply))
        return
    for warning in reply.warnings:
        typer.echo(f"warning  {warning.code}  {warning.path or '.'}  {warning.message}", err=True)
    typer.echo(reply.parcel_id)


@job_app.command("status")
def job_status(
    ctx: typer.Context,
    parcel_id: Annotated[
        str, typer.Argument(metavar="PARCEL", help="The job's parcel: p-10293, or its id.")
    ],
    output: OutputOption = Output.TEXT,
) -> None:
    """A user job: its status, the backend's outcome, the files it produced."""

    async def body(c: Clients) -> execution_pb2.GetUserParcelResponse:
        found = await resolve_parcel(c, parcel_id)
        return await c.execution.GetUserParcel(execution_pb2.GetUserParcelRequest(parcel_id=found))

    reply = run(ctx, body)
    if output is Output.JSON:
        print_json(message_dict(reply))
        return
    parcel, outcome = reply.parcel, reply.outcome
    console.print(
        f"[bold]{parcel.handle or parcel.parcel_id}[/] {parcel.parcel_id} "
        f"{name(ParcelStatus, parcel.status)}"
        f" — backend {parcel.backend or '-'}, {reply.owner_sub}@{reply.vo}, updated "
        f"{when(parcel.updated_at)}"
    )
    if outcome.result:
        result = common_pb2.OutcomeResult.Name(outcome.result).removeprefix("OUTCOME_RESULT_")
        console.print(f"outcome {result.lower()}: {outcome.message or outcome.backend_status}")
    for out in reply.outputs:
        console.print(f"output {out.output_name}: {out.lfn} ({out.lfn_size} bytes)")


# -- the registry -------------------------------------------------------------------------------

registry_app = typer.Typer(no_args_is_help=True, help="Names and versions of stored processes.")


def _vo(ctx: typer.Context, vo: str) -> str:
    """The VO given, else the caller's own (the token's `vo` claim)."""
    chosen = vo or str(connection_of(ctx).claims().get("vo") or "")
    if not chosen:
        raise InvalidArgument("no VO: give --vo", field="--vo")
    return chosen


VoOption = Annotated[str, typer.Option(help="The VO (default: your token's).")]


@registry_app.command("publish")
def registry_publish(
    ctx: typer.Context,
    name_: Annotated[str, typer.Argument(metavar="NAME", help="The process name.")],
    version: Annotated[str, typer.Argument(help="Its version.")],
    process_id: Annotated[str, typer.Argument(help="A stored process (64 hex digits).")],
    vo: VoOption = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Give a stored process a name and a version."""

    async def body(c: Clients) -> definition_pb2.PublishProcessResponse:
        return await c.definition.PublishProcess(
            definition_pb2.PublishProcessRequest(
                request_id=request_id(),
                vo=_vo(ctx, vo),
                name=name_,
                version=version,
                process_id=process_id.removeprefix("sha256-"),
            )
        )

    reply = run(ctx, body)
    _print_versions([reply.version], output, single=True)


@registry_app.command("resolve")
def registry_resolve(
    ctx: typer.Context,
    reference: Annotated[str, typer.Argument(metavar="NAME@VERSION")],
    vo: VoOption = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """The process a name and version stand for."""

    async def body(c: Clients) -> definition_pb2.ResolveProcessResponse:
        process, separator, version = reference.partition("@")
        if not separator or not process or not version:
            raise InvalidArgument(f"{reference!r} is not NAME@VERSION", field="NAME@VERSION")
        return await c.definition.ResolveProcess(
            definition_pb2.ResolveProcessRequest(vo=_vo(ctx, vo), name=process, version=version)
        )

    reply = run(ctx, body)
    _print_versions([reply.version], output, single=True)


@registry_app.command("versions")
def registry_versions(
    ctx: typer.Context,
    name_: Annotated[str, typer.Argument(metavar="NAME", help="The process name.")],
    vo: VoOption = "",
    output: OutputOption = Output.TEXT,
) -> None:
    """Every version of a name."""

    async def body(c: Clients) -> list[definition_pb2.ProcessVersion]:
        request = definition_pb2.ListVersionsRequest(vo=_vo(ctx, vo), name=name_)
        found: list[definition_pb2.ProcessVersion] = []
        while True:
            page = await c.definition.ListVersions(request)
            found.extend(page.versions)
            if not page.next_page_token:
                return found
            request.paging.page_token = page.next_page_token

    _print_versions(run(ctx, body), output)


def _print_versions(
    versions: list[definition_pb2.ProcessVersion], output: Output, *, single: bool = False
) -> None:
    if output is Output.JSON:
        found = [message_dict(v) for v in versions]
        print_json(found[0] if single else found)
        return
    rows = table("name", "version", "process", "vo", "author", "created")
    for v in versions:
        rows.add_row(v.name, v.version, v.process_id, v.vo, v.author, when(v.created_at))
    console.print(rows)


# -- provenance ---------------------------------------------------------------------------------


def provenance(
    ctx: typer.Context,
    lfn: Annotated[str, typer.Argument(metavar="LFN", help="A file dxts produced.")],
    depth: Annotated[int, typer.Option(min=0, help="Producer steps to follow; 0 = all.")] = 0,
    output: OutputOption = Output.TEXT,
) -> None:
    """Which parcel produced a file, from which inputs, and so on upstream."""
    reply = run(
        ctx,
        lambda c: c.execution.Provenance(execution_pb2.ProvenanceRequest(lfn=lfn, max_depth=depth)),
    )
    if output is Output.JSON:
        print_json(message_dict(reply))
        return
    rows = table("file", "parcel", "status", "inputs", whole=(2,))
    for record in reply.records:
        rows.add_row(
            _basename(record.output.lfn),
            record.parcel.parcel_id,
            name(ParcelStatus, record.parcel.status),
            "\n".join(_input_text(i) for i in record.inputs),
        )
    console.print(rows)


def descendants(
    ctx: typer.Context,
    lfn: Annotated[str, typer.Argument(metavar="LFN", help="Any file dxts took in or made.")],
    depth: Annotated[int, typer.Option(min=0, help="Steps to follow downstream; 0 = all.")] = 0,
    limit: Annotated[int, typer.Option(min=1, help="At most this many records.")] = 1000,
    output: OutputOption = Output.TEXT,
) -> None:
    """What was made from a file: each step that took it in, the parcel and what it made, and
    so on downstream (the other direction of `dxts provenance`)."""

    async def body(clients: Clients) -> tuple[list[Any], bool]:
        records: list[Any] = []
        token, truncated = "", False
        while len(records) < limit:
            reply = await clients.execution.ListDescendants(
                execution_pb2.ListDescendantsRequest(
                    lfn=lfn,
                    max_depth=depth,
                    paging=common_pb2.Paging(
                        page_size=min(1000, limit - len(records)), page_token=token
                    ),
                )
            )
            records.extend(reply.records)
            truncated = reply.truncated or bool(reply.next_page_token and len(records) >= limit)
            token = reply.next_page_token
            if not token:
                break
        return records, truncated

    records, truncated = run(ctx, body)
    if output is Output.JSON:
        print_json({"records": [message_dict(r) for r in records], "truncated": truncated})
        return
    rows = table("depth", "file", "input", "status", "parcel", "made", whole=(4,))
    for record in records:
        rows.add_row(
            str(record.depth),
            _basename(record.input.lfn),
            record.input.transformation_id,
            name(InputStatus, record.input.status),
            record.parcel.parcel_id if record.HasField("parcel") else "-",
            "\n".join(_basename(o.lfn) for o in record.outputs),
        )
    console.print(rows)
    if truncated:
        typer.echo(f"(more: only the first {len(records)} records are shown)")


def _basename(lfn: str) -> str:
    return lfn.rsplit("/", 1)[-1]


def _input_text(record: Any) -> str:
    return _basename(record.lfn) if record.lfn else record.descriptor_json or record.input_id
