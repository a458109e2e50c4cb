"""Helpers of the `dxts` command's tests: the example folder and small documents beside it."""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path

from typer.testing import Result

# `await dxts("show", wg)`: one command line, run against the services under test.
Dxts = Callable[..., Awaitable[Result]]

EXAMPLES = Path(__file__).parents[2] / "examples"
WALKTHROUGH = Path(__file__).parents[2] / "docs" / "operating.md"

HEADER = """\
cwlVersion: v1.2
class: Workflow
$namespaces: {dirac: https://diracgrid.org/cwl#}
hints:
  dirac:Workgraph: {schema_version: '1.0'}
inputs:
  events:
    dirac:Feeder: {name: Seeds, args: {target_events: 4, events_per_seed: 2}}
    type: {type: array, items: [File, string]}
outputs: []
"""


def write_document(directory: Path, steps: str, name: str = "workgraph.cwl") -> Path:
    """A workgraph with the example's tools beside it: HEADER plus `steps`."""
    shutil.copytree(EXAMPLES / "tools", directory / "tools", dirs_exist_ok=True)
    path = directory / name
    path.write_text(HEADER + textwrap.dedent(steps))
    return path


def walkthrough_lines() -> list[str]:
    """Every `dxts ...` (or `VAR=$(dxts ...)`) line of the walkthrough's code blocks, in order,
    without its trailing `# comment`."""
    blocks = re.findall(r"```\n(.*?)```", WALKTHROUGH.read_text(), flags=re.DOTALL)
    lines = [re.sub(r"\s+# .*$", "", line) for block in blocks for line in block.splitlines()]
    return [line for line in lines if re.match(r"^(\w+=\$\()?dxts ", line)]
