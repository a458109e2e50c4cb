"""Start-up: `dxts --help` and the read verbs import only what they need (issue 18). The time
itself is measured by `python -m dxts.bench cli`; here, what is imported."""

from __future__ import annotations

import json
import subprocess
import sys

from dxts.cli.main import VERBS, app

# Run in a fresh interpreter: the command line, then the top-level packages it imported.
PROBE = """
import json, sys
from dxts.cli.main import app
try:
    app(sys.argv[1:], prog_name="dxts")
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


def test_help_imports_no_verb_module_no_grpc_and_no_rich() -> None:
    modules = imported("--help")
    for heavy in ("grpc", "google.protobuf", "rich", "yaml", *SERVER_SIDE):
        assert not loaded(modules, heavy), heavy
    assert not any(loaded(modules, module) for module, _, _ in VERBS.values())


def test_a_read_verb_imports_the_client_side_only() -> None:
    modules = imported("list")
    assert loaded(modules, "grpc") and loaded(modules, "dxts.cli.workgraphs")
    for heavy in ("yaml", "rich.progress", "dxts.cli.up", *SERVER_SIDE):
        assert not loaded(modules, heavy), heavy


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
