"""Problems carry the line and column of their path in the document as written (map and list
forms alike), and `dxts validate` prints them after the message."""

from __future__ import annotations

import yaml
from cwl_support import FIXTURES, fixture
from typer.testing import CliRunner

from dxts.cli.main import app
from dxts.core.plugins.registry import Registry
from dxts.cwl.check import check_document
from dxts.cwl.positions import locate
from dxts.cwl.problems import Kind

LIST_FORM = """\
cwlVersion: v1.2
class: Workflow
steps:
- id: sim
  run: sim.cwl
  in:
  - {id: seed, source: events}
- id: merge
  hints:
    dirac:Transformation:
      packer: {name: BySize, args: {group_size: 0}}
"""


def test_a_path_is_located_in_the_map_and_the_list_forms() -> None:
    root = yaml.compose(LIST_FORM, Loader=yaml.SafeLoader)
    assert locate(root, "steps.merge") == (8, 3)  # the item, after its dash
    assert locate(root, "steps.merge.hints.dirac:Transformation.packer.args.group_size") == (
        11,
        37,
    )
    assert locate(root, "steps.sim.in[0]") == (7, 5)
    # A path written only in part stops at the deepest part written; none at all: no position.
    assert locate(root, "steps.merge.hints.dirac:Transformation.actions") == (10, 5)
    assert locate(root, "outputs.datasets") is None


def test_dxts_validate_prints_each_problems_line_and_column() -> None:
    text = (FIXTURES / "invalid" / "plugin-args.cwl").read_text().splitlines()
    (row,) = [n for n, line in enumerate(text, start=1) if "group_size" in line]
    column = text[row - 1].index("group_size") + 1
    problems, _ = check_document(fixture("invalid/plugin-args.cwl"), catalogue=Registry.discover())
    (args,) = [p for p in problems if p.kind is Kind.PLUGIN_ARGS and "group_size" in p.path]
    assert args.position == (row, column)
    result = CliRunner().invoke(
        app, ["validate", str(FIXTURES / "invalid" / "plugin-args.cwl"), "--bundle", str(FIXTURES)]
    )
    assert f"greater than or equal to 1  (line {row}, column {column})" in result.output
