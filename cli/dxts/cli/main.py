"""The `dxts` command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.tree import Tree

from dxts.cli import adaptor_check, jobs, open_page, operate, tokens, up, workgraphs
from dxts.cli.client import Options
from dxts.cli.output import Output
from dxts.core.config import CONFIG_FILE_VARIABLE, load_installation_config
from dxts.core.errors import InvalidArgument
from dxts.core.plugins import PluginRegistryError
from dxts.core.plugins.registry import Registry
from dxts.cwl.check import check_document
from dxts.cwl.compile import Plan
from dxts.cwl.loading import Bundle
from dxts.cwl.problems import Severity

app = typer.Typer(no_args_is_help=True, help="dxts: the DiracX Transformation System.")


@app.callback()
def main(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where `dxts up` keeps its state and the connection file the commands read "
            "(default: DXTS_DATA_DIR, else ~/.dxts).",
        ),
    ] = None,
    definition: Annotated[
        str | None, typer.Option(help="host:port of the definition service.", show_default=False)
    ] = None,
    execution: Annotated[
        str | None, typer.Option(help="host:port of the execution service.", show_default=False)
    ] = None,
    accounting: Annotated[
        str | None, typer.Option(help="host:port of the accounting service.", show_default=False)
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="Bearer token (default: DXTS_TOKEN).", show_default=False)
    ] = None,
) -> None:
    """Submit, follow and steer workgraphs; run everything locally with `dxts up`.

    Service addresses and the token come from these options, else DXTS_DEFINITION_ADDRESS,
    DXTS_EXECUTION_ADDRESS, DXTS_ACCOUNTING_ADDRESS and DXTS_TOKEN, else the connection file
    `dxts up` writes in its data directory.
    """
    ctx.obj = Options(
        {
            "definition": definition,
            "execution": execution,
            "accounting": accounting,
            "token": token,
        },
        data_dir,
    )


@app.command()
def validate(
    document: Annotated[Path, typer.Argument(help="The workgraph document (YAML or JSON).")],
    bundle: Annotated[
        Path | None,
        typer.Option(
            help="Directory the document's relative `run` paths resolve in "
            "(default: the document's directory)."
        ),
    ] = None,
    allow_unknown_plugins: Annotated[
        bool, typer.Option(help="Report plugins not installed here as warnings, not errors.")
    ] = False,
    plan: Annotated[bool, typer.Option(help="Print the compiled plan.")] = False,
    output: Annotated[Output, typer.Option(help="Format of --plan.")] = Output.TEXT,
    vo: Annotated[
        str, typer.Option(help="VO whose defaults in the installation file DXTS_CONFIG_FILE apply.")
    ] = "",
) -> None:
    """Validate a workgraph and compile it, with no server and no database.

    Plugin names are checked against the plugins installed here. Prints every problem, one
    per line (`error|warning  kind  path  message`); exits 1 if any is an error.
    """
    root = (bundle or document.parent).resolve()
    try:
        main_path = document.resolve().relative_to(root).as_posix()
    except ValueError:
        typer.echo(f"error: {document} is not inside the bundle {root}", err=True)
        raise typer.Exit(2) from None
    try:
        config = load_installation_config().definition
    except InvalidArgument as exc:
        typer.echo(f"error: {CONFIG_FILE_VARIABLE}: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        registry = Registry.discover()
    except PluginRegistryError as exc:
        typer.echo(f"error: the installed plugins are broken: {exc}", err=True)
        raise typer.Exit(2) from None
    problems, compiled = check_document(
        Bundle.from_directory(root, main_path),
        catalogue=registry,
        config=config,
        vo=vo,
        allow_unknown_plugins=allow_unknown_plugins,
    )
    for problem in problems:
        typer.echo(problem.line())
    if plan and compiled is not None:
        if output is Output.JSON:
            typer.echo(json.dumps(compiled.as_json(), indent=2))
        else:
            Console().print(_tree(compiled))
    if any(p.severity is Severity.ERROR for p in problems):
        raise typer.Exit(1)


def _tree(plan: Plan) -> Tree:
    label = plan.annotations.get("label") or plan.annotations.get("id") or "workgraph"
    tree = Tree(f"[bold]{label}[/] type={plan.type} scouts={plan.scouts}")
    if plan.approving:
        approving = tree.add("approving")
        for action in plan.approving:
            approving.add(f"{action.position}. {action.action} {action.args or ''}")
    for member in plan.members:
        node = tree.add(
            f"[bold]{member.name}[/] {member.kind} initial_state={member.initial_state}"
            + (" (scouts)" if member.scouts else "")
        )
        node.add(f"feeder {member.feeder} ← {member.feeds_from}")
        node.add(f"packer {member.packer} {member.packer_args or ''}")
        if member.process_id:
            node.add(f"process sha256-{member.process_id.hex()[:16]}…")
        for out in member.outputs:
            node.add(f"output {out.name}" + (" (intermediate)" if out.intermediate else ""))
        if member.upstream:
            node.add(f"upstream {', '.join(member.upstream)}")
        for action in member.actions:
            node.add(f"{action.state} {action.position}. {action.action} {action.args or ''}")
    return tree


app.command()(workgraphs.submit)
app.command("list")(workgraphs.list_workgraphs)
app.command()(workgraphs.show)
app.command()(workgraphs.watch)
app.command()(workgraphs.logs)
for verb in (
    operate.start,
    operate.pause,
    operate.resume,
    operate.drain,
    operate.halt,
    operate.cancel,
    operate.flush,
    operate.force,
    operate.reset,
):
    app.command()(verb)
app.command("extend-scout")(operate.extend_scout)
app.command("return-to-active")(operate.return_to_active)
app.add_typer(operate.feeder_app, name="feeder")
app.add_typer(operate.inputs_app, name="inputs")
app.add_typer(jobs.job_app, name="job")
app.add_typer(jobs.registry_app, name="registry")
app.add_typer(tokens.token_app, name="token")
app.add_typer(adaptor_check.adaptor_app, name="adaptor")
app.command()(jobs.provenance)
app.command()(up.up)
app.command("open")(open_page.open_page)
