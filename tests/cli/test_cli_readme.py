"""The README's main-job command names only what exists: a script of this repository (whose
own `dxts` calls are commands the `dxts` app has) or an installed entry point."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import typer

from dxts.cli.main import app

REPO = Path(__file__).parents[2]


def fenced_block_after(marker: str) -> list[str]:
    lines = (REPO / "README.md").read_text().splitlines()
    start = lines.index(marker)
    assert lines[start + 1] == "```", f"{marker} must be right before the fenced block"
    end = lines.index("```", start + 2)
    return [line for line in lines[start + 2 : end] if line.strip()]


def dxts_commands() -> set[str]:
    command = typer.main.get_command(app)
    return set(command.list_commands(typer.Context(command)))  # type: ignore[attr-defined]


def test_the_test_command_block_is_unchanged() -> None:
    assert fenced_block_after("<!-- test-command -->") == ["scripts/test"]


def test_the_main_command_names_only_what_exists() -> None:
    entry_points = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])
    commands = fenced_block_after("<!-- main-command -->")
    assert commands, "the main-command block is empty"
    for line in commands:
        program = line.split()[0]
        if "/" in program:
            path = REPO / program
            assert path.is_file() and os.access(path, os.X_OK), f"{program} is not a script"
        else:
            assert program in entry_points, f"{program} is not an entry point"


def test_the_demo_script_calls_only_real_dxts_commands() -> None:
    script = (REPO / "scripts" / "demo").read_text()
    called = set(re.findall(r'"\$dxts" ([a-z-]+)', script))
    assert {"up", "submit", "start", "watch", "show", "provenance"} <= called
    assert called <= dxts_commands()
    for helper in re.findall(r"^(scripts/[\w-]+)", script, re.MULTILINE):
        assert os.access(REPO / helper, os.X_OK), helper
