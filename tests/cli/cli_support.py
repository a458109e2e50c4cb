"""Helpers of the `dxts` command's tests: the example folder and small documents beside it."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path

from typer.testing import Result

# `await dxts("show", wg)`: one command line, run against the services under test.
Dxts = Callable[..., Awaitable[Result]]

EXAMPLES = Path(__file__).parents[2] / "examples"

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
