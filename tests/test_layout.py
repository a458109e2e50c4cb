"""The layout's import rules: components meet only through core and the generated contracts.

Each service, the dispatcher and the backends may import `dxts.core` and the generated stubs
(`dxts.v1`), never each other's modules; core imports nothing above itself. The CLI (`dxts up`
composes every component in one process) and the benchmarks are the composition roots.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
    "package-dir"
]

ALLOWED: dict[str, set[str]] = {
    "dxts.core": {"dxts.core", "dxts.v1"},
    "dxts.v1": {"dxts.v1"},
    "dxts.definition": {"dxts.core", "dxts.v1", "dxts.definition"},
    "dxts.execution": {"dxts.core", "dxts.v1", "dxts.execution"},
    "dxts.accounting": {"dxts.core", "dxts.v1", "dxts.accounting"},
    "dxts.dispatcher": {"dxts.core", "dxts.v1", "dxts.dispatcher"},
    "dxts.backends": {"dxts.core", "dxts.v1", "dxts.backends"},
    "dxts.cli": {"*"},
    "dxts.bench": {"*"},
    "dxts.web": {"dxts.core", "dxts.v1", "dxts.web"},
}


def imported_dxts_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("dxts."))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("dxts."):
                found.add(node.module)
            elif node.module == "dxts":
                found.update(f"dxts.{alias.name}" for alias in node.names)
    return found


def component_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_every_component_is_declared() -> None:
    assert set(PACKAGE_DIRS) == set(ALLOWED)


@pytest.mark.parametrize("component", sorted(PACKAGE_DIRS))
def test_components_import_only_what_they_may(component: str) -> None:
    allowed = ALLOWED[component]
    if "*" in allowed:
        return
    violations = []
    for path in sorted((REPO / PACKAGE_DIRS[component]).rglob("*.py")):
        for module in imported_dxts_modules(path):
            if component_of(module) not in allowed:
                violations.append(f"{path.relative_to(REPO)} imports {module}")
    assert not violations, "\n".join(violations)


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The rule is only worth something if the scanner catches a cross-service import."""
    offender = tmp_path / "m.py"
    offender.write_text("from dxts.execution.db import x\nimport dxts.accounting.logic\n")
    assert {component_of(m) for m in imported_dxts_modules(offender)} == {
        "dxts.execution",
        "dxts.accounting",
    }
