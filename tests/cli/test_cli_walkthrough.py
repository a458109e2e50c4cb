"""The operator walkthrough (docs/operating.md) and its example (examples/scout-approve.cwl):
the example validates, every command the walkthrough shows is a real verb with real options,
and together they use every steering verb."""

from __future__ import annotations

import shlex

import typer
from cli_support import EXAMPLES, walkthrough_lines
from typer.testing import CliRunner

from dxts.cli.main import app

STEERING = {
    "start",
    "pause",
    "resume",
    "drain",
    "halt",
    "cancel",
    "flush",
    "force",
    "reset",
    "extend-scout",
    "return-to-active",
    "feeder enable",
    "feeder disable",
    "feeder args",
    "inputs reset",
    "inputs write-off",
}


def shown_commands() -> list[list[str]]:
    """Every `dxts ...` line of the walkthrough's code blocks, as arguments."""
    return [
        shlex.split(line.split("$(", 1)[-1].rstrip(")&").strip())[1:]
        for line in walkthrough_lines()
    ]


def verb_of(args: list[str]) -> tuple[str, typer.main.TyperCommand]:
    """The verb (with its sub-verb) an argument list runs, and its command."""
    group = typer.main.get_command(app)
    context = typer.Context(group)
    command = group.get_command(context, args[0])  # type: ignore[attr-defined]
    assert command is not None, args
    if hasattr(command, "commands"):
        # `dxts inputs TF` lists them: an argument naming no sub-verb runs `list`.
        sub = args[1] if args[1] in command.commands else "list"
        return f"{args[0]} {sub}", command.commands[sub]
    return args[0], command


def test_the_example_validates() -> None:
    result = CliRunner().invoke(app, ["validate", str(EXAMPLES / "scout-approve.cwl")])
    assert (result.exit_code, result.output) == (0, "scout-approve.cwl: valid, 2 members\n")


def test_every_command_shown_is_a_real_verb_with_real_options() -> None:
    commands = shown_commands()
    assert len(commands) > 20
    for args in commands:
        verb, command = verb_of(args)
        known = {opt for param in command.params for opt in param.opts}
        for arg in args:
            if arg.startswith("--"):
                assert arg.split("=", 1)[0] in known, (verb, arg)


def test_the_walkthrough_uses_every_steering_verb() -> None:
    used = {verb_of(args)[0] for args in shown_commands()}
    assert used >= STEERING, STEERING - used
