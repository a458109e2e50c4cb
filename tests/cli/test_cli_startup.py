"""Start-up: `dxts --help` and the read verbs import only what they need (issues 18 and 32). The
time itself is measured by `python -m dxts.bench cli`; here, what is imported: besides the
modules that must never come in, `dxts list` answering a running service is held to an
allow-list (the packages, dxts's own modules, the few of rich), so that a new import on its path
fails here and is added on purpose or made lazy."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from typer.testing import CliRunner

from dxts.cli.main import VERBS, app
from dxts.cli.up import Stack
from dxts.core.grpc import DevKeys

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


# What `dxts list` may import beyond the interpreter's own start-up and the standard library,
# answering a running service: the packages, by their top-level name (grpc registers the
# grpc_* packages beside it as it starts; typer brings the last three)...
LIST_PACKAGES = {
    "dxts",
    "google",
    "grpc",
    "grpc_health",
    "grpc_reflection",
    "grpc_tools",
    "typer",
    "annotated_doc",
    "shellingham",
    "typing_extensions",
    "rich",
    "cython_runtime",
}
# ... dxts's own modules (the client side of the verb, its tables and the contracts it reads)...
LIST_DXTS_MODULES = {
    "dxts",
    "dxts.cli",
    "dxts.cli.attention",
    "dxts.cli.client",
    "dxts.cli.connection",
    "dxts.cli.conversion",
    "dxts.cli.entry",
    "dxts.cli.main",
    "dxts.cli.names",
    "dxts.cli.output",
    "dxts.cli.tables",
    "dxts.cli.verbs",
    "dxts.cli.workgraphs",
    "dxts.core",
    "dxts.core.deadlines",
    "dxts.core.errors",
    "dxts.core.grpc",
    "dxts.core.grpc.client",
    "dxts.core.grpc.convert",
    "dxts.core.grpc.errors",
    "dxts.core.states",
    "dxts.v1",
    "dxts.v1.accounting_pb2",
    "dxts.v1.common_pb2",
    "dxts.v1.definition_pb2",
    "dxts.v1.definition_pb2_grpc",
}
# ... and of rich, only the cell widths the plain tables are cut by.
LIST_RICH_MODULES = {"rich", "rich._extension", "rich.cells", "rich._unicode_data"}


def imported(*args: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules loaded by `dxts ARGS` in a fresh interpreter; with no `env`, against no
    service (the read verb fails fast on a closed port, after its imports)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        check=False,
        env=env or {"PATH": "", "HOME": "/nonexistent", "DXTS_DEFINITION_ADDRESS": "127.0.0.1:1"},
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def beyond_the_interpreter(modules: set[str]) -> set[str]:
    """`modules` less what a bare interpreter (its site hooks) loads and the standard library."""
    bare = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "", "HOME": "/nonexistent"},
    )
    started = set(json.loads(bare.stdout)) | {"__main__"}
    return {
        m
        for m in modules - started
        if m.split(".")[0] not in sys.stdlib_module_names and not m.startswith("_cython_")
    }


def outside_the_allow_list(modules: set[str]) -> list[str]:
    """The modules of `modules` (beyond the interpreter) that `dxts list` may not import."""

    def allowed(module: str) -> bool:
        package = module.split(".")[0]
        if package == "dxts":
            return module in LIST_DXTS_MODULES
        if package == "rich":  # a listed module, or inside a listed package other than rich
            return module in LIST_RICH_MODULES or any(
                module.startswith(f"{r}.") for r in LIST_RICH_MODULES - {"rich"}
            )
        return package in LIST_PACKAGES

    return sorted(m for m in beyond_the_interpreter(modules) if not allowed(m))


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


async def test_list_answering_a_service_imports_only_the_allow_list(
    stack: Stack, dev_keys: DevKeys
) -> None:
    env = {
        "PATH": "",
        "HOME": "/nonexistent",
        "DXTS_TOKEN": dev_keys.issue("demo", "olivia", ["user"]),
        **{
            f"DXTS_{name.upper()}_ADDRESS": stack.address(name)
            for name in ("definition", "execution", "accounting", "dispatcher")
        },
    }
    modules = await asyncio.to_thread(imported, "list", env=env)
    assert loaded(modules, "dxts.cli.workgraphs") and "dxts.v1.definition_pb2" in modules
    assert outside_the_allow_list(modules) == []
    # The rich error details are read only when a call fails.
    assert not loaded(modules, "grpc_status") and not loaded(modules, "google.rpc")


def test_the_allow_list_catches_a_module_beyond_it() -> None:
    allowed = {"dxts.cli.tables", "grpc.aio", "rich.cells", "json"}
    assert outside_the_allow_list(allowed) == []
    for stray in ("sqlalchemy.engine", "dxts.cli.up", "rich.console", "yaml"):
        assert outside_the_allow_list(allowed | {stray}) == [stray]


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
