"""The `dxts` command: a static table of verbs, each verb's module imported only when it runs.

An operator types dozens of commands a shift, so start-up matters: `dxts --help` imports no
grpc, no protobuf and no rich, and `dxts list` imports only the client side (never the
services, SQLAlchemy or the CWL tooling). The table below is the one place a verb is added:
name → (module, attribute, one-line help); the attribute is a typer command function or a
typer.Typer of sub-verbs.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from dxts.cli.connection import Options

VERBS: dict[str, tuple[str, str, str]] = {
    "validate": (
        "dxts.cli.validate",
        "validate",
        "Validate a workgraph and compile it, with no server.",
    ),
    "submit": ("dxts.cli.workgraphs", "submit", "Submit a workgraph; prints its id."),
    "list": ("dxts.cli.workgraphs", "list_workgraphs", "List workgraphs, newest last."),
    "show": ("dxts.cli.workgraphs", "show", "A workgraph and its members, with ids and counts."),
    "watch": ("dxts.cli.workgraphs", "watch", "Follow a workgraph until it ends or is blocked."),
    "logs": ("dxts.cli.workgraphs", "logs", "The log of a workgraph or a member."),
    "why": ("dxts.cli.inspect", "why", "What holds a workgraph or a member, in plain words."),
    "parcels": ("dxts.cli.inspect", "parcels", "A member's parcels, with their status."),
    "parcel": ("dxts.cli.inspect", "parcel", "One parcel: outcome, failure reason, usage, files."),
    "start": ("dxts.cli.operate", "start", "Start a New workgraph."),
    "pause": ("dxts.cli.operate", "pause", "Pause a member: its packer stops."),
    "resume": ("dxts.cli.operate", "resume", "Resume a paused member."),
    "drain": ("dxts.cli.operate", "drain", "Stop feeding; let the work in flight finish."),
    "halt": ("dxts.cli.operate", "halt", "Stop everything: cancel parcels, write off inputs."),
    "cancel": ("dxts.cli.operate", "cancel", "Cancel a workgraph: its outputs are removed."),
    "flush": ("dxts.cli.operate", "flush", "Pack what a member holds back as too small, once."),
    "force": ("dxts.cli.operate", "force", "Record an action's result yourself (a sign-off)."),
    "reset": ("dxts.cli.operate", "reset", "Clear an action's result so that it runs again."),
    "extend-scout": ("dxts.cli.operate", "extend_scout", "Back from Approving to Scouting."),
    "return-to-active": (
        "dxts.cli.operate",
        "return_to_active",
        "Back from Finalizing to Active.",
    ),
    "feeder": ("dxts.cli.operate", "feeder_app", "A member's feeder: enable, disable, args."),
    "inputs": ("dxts.cli.operate", "inputs_app", "A member's inputs: list, reset, write off."),
    "job": ("dxts.cli.jobs", "job_app", "User jobs: one CWL process, one parcel."),
    "file": ("dxts.cli.files", "file_app", "Files in and out of the storage elements."),
    "registry": ("dxts.cli.jobs", "registry_app", "The process registry."),
    "provenance": ("dxts.cli.jobs", "provenance", "Where an output file came from."),
    "token": ("dxts.cli.tokens", "token_app", "Bearer tokens signed by the installation key."),
    "up": ("dxts.cli.up", "up", "Run every component in this process (embedded default)."),
    "open": ("dxts.cli.open_page", "open_page", "A page of the web view, with a one-time sign-in."),
    "adaptor": ("dxts.cli.adaptor_check", "adaptor_app", "Check a backend adaptor's contract."),
}


class Verbs(TyperGroup):
    """A group whose commands come from VERBS: listed (and their help printed) from the table,
    built from their module only when one is run or asked for its own help."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = VERBS.get(cmd_name)
        if found is None:
            return None
        module, attribute, _ = found
        target: Any = getattr(importlib.import_module(module), attribute)
        if isinstance(target, typer.Typer):
            group = typer.main.get_group(target)
            group.name = cmd_name
            return group
        single = typer.Typer()
        single.command(cmd_name)(target)
        return typer.main.get_command(single)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        # The plain layout: typer's rich one asks every command for its help (importing every
        # verb's module, and rich).
        super(TyperGroup, self).format_help(ctx, formatter)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # From the table: asking each command for its help would import every verb's module.
        with formatter.section("Commands"):
            formatter.write_dl([(verb, summary) for verb, (_, _, summary) in VERBS.items()])


app = typer.Typer(cls=Verbs, no_args_is_help=True, help="dxts: the DiracX Transformation System.")


@app.callback()
def main(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="The data directory of `dxts up`, whose connection file the commands read "
            "(default: DXTS_DATA_DIR, else the running `dxts up`'s, else ~/.dxts).",
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
