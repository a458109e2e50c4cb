"""Start-up: `dxts --help` and the read verbs import only what they need (issue 18). The time
itself is measured by `python -m dxts.bench cli`; here, what is imported."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from dxts.cli.main import VERBS, app

# Run in a fresh interpreter: the command line, then the top-level packages it imported.
PROBE = """
import json, sys
from dxts.cli.entry import main
sys.argv = ["dxts", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
SERVER_SIDE = (
    "sqlalchemy",
    "alembic",
    "cwl_utils",
    "schema_salad",
    "pydantic_settings",
    "dxts.cwl.loading",
    "dxts.core.db",
    "dxts.core.grpc.server",
    "dxts.definition",
    "dxts.execution",
    "dxts.accounting",
    "dxts.dispatcher",
)


def imported(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        check=False,
        # No service: the read verb fails fast on a closed port, after its imports.
        env={"PATH": "", "HOME": "/nonexistent", "DXTS_DEFINITION_ADDRESS": "127.0.0.1:1"},
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def loaded(modules: set[str], prefix: str) -> bool:
    return any(m == prefix or m.startswith(prefix + ".") for m in modules)


def test_help_imports_no_verb_module_no_typer_no_grpc_and_no_rich() -> None:
    for args in (["--help"], []):
        modules = imported(*args)
        for heavy in ("typer", "pydantic", "grpc", "google.protobuf", "rich", *SERVER_SIDE):
            assert not loaded(modules, heavy), (args, heavy)
        assert not any(loaded(modules, module) for module, _, _ in VERBS.values())


def test_the_quick_help_is_the_one_typer_prints() -> None:
    def printed(program: str, columns: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", program, "--help"],
            capture_output=True,
            text=True,
            check=True,
            env={"PATH": "", "COLUMNS": columns},
        )
        return done.stdout

    for columns in ("80", "60", "200"):
        quick = printed("from dxts.cli.entry import main; main()", columns)
        typers = printed("from dxts.cli.main import app; app(prog_name='dxts')", columns)
        assert quick == typers, columns


def test_dxts_alone_prints_the_help_as_a_usage_error() -> None:
    alone = subprocess.run(
        [sys.executable, "-c", "from dxts.cli.entry import main; main()"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "", "COLUMNS": "80"},
    )
    assert alone.returncode == 2
    assert alone.stdout.startswith("Usage: dxts [OPTIONS] COMMAND")


def test_a_read_verb_imports_the_client_side_only() -> None:
    modules = imported("list")
    assert loaded(modules, "grpc") and loaded(modules, "dxts.cli.workgraphs")
    for heavy in ("yaml", "pydantic", "rich.progress", "dxts.cli.up", *SERVER_SIDE):
        assert not loaded(modules, heavy), heavy


def test_options_are_converted_and_refused_as_typer_does_without_pydantic() -> None:
    """Plain parameters are converted without typer's pydantic adapters (`conversion`): the
    same values, and the same usage error (exit 2) naming the option for a bad one."""
    runner = CliRunner()
    for args, said in (
        (["list", "--limit", "x"], "'x' is not a valid integer"),
        (["list", "--limit", "0"], "0 is below the minimum, 1"),
        (["list", "-o", "yaml"], "'yaml' is not a valid choice: text, json"),
        (["watch", "WG", "--interval", "0"], "0 is below the minimum, 0.1"),
    ):
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 2, (args, result.output)
        assert said in result.stderr, (args, result.stderr)


def test_a_plain_conversion_gives_what_typers_would() -> None:
    from enum import StrEnum
    from pathlib import Path

    from typer.models import OptionInfo

    from dxts.cli.conversion import _conversion

    class Colour(StrEnum):
        RED = "red"

    info = OptionInfo()
    for annotation, text, expected in (
        (str, "a b", "a b"),
        (int, "42", 42),
        (float, "0.5", 0.5),
        (bool, "yes", True),
        (Path, "x/y", Path("x/y")),
        (Colour, "red", Colour.RED),
    ):
        conversion = _conversion(annotation, info)
        assert conversion is not None and conversion.convert(text) == expected, annotation
    ranged = OptionInfo(min=1, clamp=True)
    assert _conversion(int, ranged) is None  # clamping is typer's
    assert _conversion(list, info) is None


def test_every_verb_of_the_table_is_built_with_its_help() -> None:
    command = __import__("typer").main.get_command(app)
    context = __import__("typer").Context(command)
    for verb in VERBS:
        built = command.get_command(context, verb)
        assert built is not None and built.name == verb
        assert built.help, verb


def test_the_cwl_runner_parses_its_command_line_before_any_heavy_import() -> None:
    probe = """
import json, sys
from dxts.cli.cwl_runner import main
try:
    main(["--help"])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "usage: dxts-cwl-runner" in done.stdout
    for heavy in ("grpc", "google.protobuf", "typer", "yaml", *SERVER_SIDE):
        assert not loaded(modules, heavy), heavy
