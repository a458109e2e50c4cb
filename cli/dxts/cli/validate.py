"""`dxts validate`: a workgraph checked and compiled here, with no server and no database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.tree import Tree

from dxts.cli.output import Output
from dxts.core.config import CONFIG_FILE_VARIABLE, load_installation_config
from dxts.core.errors import InvalidArgument
from dxts.core.plugins import PluginRegistryError
from dxts.core.plugins.registry import Registry
from dxts.cwl.check import check_document
from dxts.cwl.compile import Plan
from dxts.cwl.loading import Bundle
from dxts.cwl.problems import Problem, Severity


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
    per line (`error|warning  kind  path  message`), then a one-line verdict; exits 1 if any is
    an error.
    """
    if not document.is_file():
        what = "is a directory, not a document" if document.is_dir() else "no such file"
        typer.echo(f"error: {document}: {what}", err=True)
        raise typer.Exit(2)
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
    if not (plan and output is Output.JSON):  # the plan alone, for scripts
        typer.echo(verdict(document, problems, compiled))
    if any(p.severity is Severity.ERROR for p in problems):
        raise typer.Exit(1)


def verdict(document: Path, problems: list[Problem], compiled: Plan | None) -> str:
    """The last line: whether the document would be accepted, and what it holds.

    "mc-demo.cwl: valid, 4 members (1 warning)" or "mc-demo.cwl: 2 errors, not accepted"."""
    errors = sum(p.severity is Severity.ERROR for p in problems)
    warnings = len(problems) - errors
    if errors or compiled is None:
        return f"{document.name}: {_count(errors, 'error')}, not accepted"
    noted = f" ({_count(warnings, 'warning')})" if warnings else ""
    return f"{document.name}: valid, {_count(len(compiled.members), 'member')}{noted}"


def _count(number: int, what: str) -> str:
    return f"{number} {what}{'' if number == 1 else 's'}"


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
