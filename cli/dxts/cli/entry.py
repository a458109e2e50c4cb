"""The `dxts` console script: `dxts --help` (and `dxts` alone) answered from the static table
with nothing imported, every other command handed to the typer application.

An operator types `dxts --help` to find a verb; typer alone (with the vendored click and
pydantic it imports to parse options) costs more than the interpreter's own start-up.
"""

from __future__ import annotations

import sys

# `dxts` alone prints the help as a usage error does (exit status 2), as typer does.
NO_ARGUMENTS_STATUS = 2


def main() -> None:
    arguments = sys.argv[1:]
    if arguments in ([], ["--help"]):
        from dxts.cli.verbs import help_text

        sys.stdout.write(help_text())
        sys.exit(NO_ARGUMENTS_STATUS if not arguments else 0)
    from dxts.cli.main import app

    app(prog_name="dxts")
