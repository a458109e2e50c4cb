"""The `dxts` command: the typer application over the static table of verbs (`verbs.VERBS`),
each verb's module imported only when it runs.

An operator types dozens of commands a shift, so start-up matters: `dxts --help` is answered
without this module (`entry`), a verb's own help imports only its module, and `dxts list`
imports only the client side (never the services, SQLAlchemy or the CWL tooling).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from dxts.cli.connection import Options
from dxts.cli.conversion import convert_params, convert_plainly
from dxts.cli.verbs import OPTIONS, SUMMARY, VERBS


class Verbs(TyperGroup):
    """A group whose commands come from VERBS: listed (and their help printed) from the table,
    built from their module only when one is run or asked for its own help."""

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        convert_params(params)  # the global options
        return params

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
            for sub in group.commands.values():
                convert_plainly(sub)
            convert_plainly(group)
            return group
        single = typer.Typer()
        single.command(cmd_name)(target)
        command = typer.main.get_command(single)
        convert_plainly(command)
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        # The plain layout: typer's rich one asks every command for its help (importing every
        # verb's module, and rich).
        super(TyperGroup, self).format_help(ctx, formatter)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # From the table: asking each command for its help would import every verb's module.
        with formatter.section("Commands"):
            formatter.write_dl([(verb, summary) for verb, (_, _, summary) in VERBS.items()])


app = typer.Typer(cls=Verbs, no_args_is_help=True, help=SUMMARY)


@app.callback()
def main(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None,
        typer.Option(help=OPTIONS["data-dir"][1]),
    ] = None,
    definition: Annotated[
        str | None, typer.Option(help=OPTIONS["definition"][1], show_default=False)
    ] = None,
    execution: Annotated[
        str | None, typer.Option(help=OPTIONS["execution"][1], show_default=False)
    ] = None,
    accounting: Annotated[
        str | None, typer.Option(help=OPTIONS["accounting"][1], show_default=False)
    ] = None,
    dispatcher: Annotated[
        str | None, typer.Option(help=OPTIONS["dispatcher"][1], show_default=False)
    ] = None,
    token: Annotated[str | None, typer.Option(help=OPTIONS["token"][1], show_default=False)] = None,
) -> None:
    """Submit, follow and steer workgraphs; run everything locally with `dxts up`.

    Service addresses and the token come from these options, else DXTS_DEFINITION_ADDRESS,
    DXTS_EXECUTION_ADDRESS, DXTS_ACCOUNTING_ADDRESS, DXTS_DISPATCHER_ADDRESS and DXTS_TOKEN, else
    the connection file
    `dxts up` writes in its data directory.
    """
    ctx.obj = Options(
        {
            "definition": definition,
            "execution": execution,
            "accounting": accounting,
            "dispatcher": dispatcher,
            "token": token,
        },
        data_dir,
    )
