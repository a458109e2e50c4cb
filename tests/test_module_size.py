"""No module of the services, the dispatcher or the backends is over `MAX_LINES` lines.

A module that grows past it holds more than one idea and is split along them; the cap keeps a
reader's unit of attention one file. The CLI, core, the CWL front end and the benchmarks are not
capped here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
    "package-dir"
]
CAPPED = (
    "dxts.definition",
    "dxts.execution",
    "dxts.accounting",
    "dxts.dispatcher",
    "dxts.backends",
)
MAX_LINES = 500


def over_the_cap(root: Path, *, limit: int = MAX_LINES) -> list[str]:
    """The modules under `root` longer than `limit` lines, with their length."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


@pytest.mark.parametrize("component", CAPPED)
def test_no_module_is_over_the_cap(component: str) -> None:
    too_long = over_the_cap(REPO / PACKAGE_DIRS[component])
    assert not too_long, f"over {MAX_LINES} lines (split it):\n" + "\n".join(too_long)


def test_the_cap_sees_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert over_the_cap(tmp_path) == [f"pkg/long.py: {MAX_LINES + 1} lines"]
