"""The layout's import rules: components meet only through core and the generated contracts.

Each service, the dispatcher and the backends may import `dxts.core` and the generated stubs
(`dxts.v1`), never each other's modules; core imports nothing above itself. `dxts.cwl` (loading,
validating and compiling CWL, with no database and no gRPC) imports only core, and the
definition service and the CLI both use it. The CLI is a client: only `dxts up`, which composes
every component in one process, imports the services; it and the benchmarks are the composition
roots.

Within a component laid out in layers (`edge/`, `logic/`, `store/`): the logic works on domain
types, so it imports neither gRPC nor the generated messages; the store is SQL only, so it
imports neither those nor the layers above it; the edge maps and forwards, so it runs no SQL.
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
    "dxts.cwl": {"dxts.core", "dxts.cwl"},
    "dxts.definition": {"dxts.core", "dxts.v1", "dxts.cwl", "dxts.definition"},
    "dxts.execution": {"dxts.core", "dxts.v1", "dxts.execution"},
    "dxts.accounting": {"dxts.core", "dxts.v1", "dxts.accounting"},
    "dxts.dispatcher": {"dxts.core", "dxts.v1", "dxts.dispatcher"},
    "dxts.backends": {"dxts.core", "dxts.v1", "dxts.backends"},
    "dxts.cli": {"*"},
    "dxts.bench": {"*"},
    "dxts.web": {"dxts.core", "dxts.v1", "dxts.web"},
}
# The components a client must reach over gRPC, never by import.
SERVER_SIDE = {
    "dxts.definition",
    "dxts.execution",
    "dxts.accounting",
    "dxts.dispatcher",
    "dxts.backends",
}
# The one CLI module that runs the components in process (`dxts up`).
CLI_COMPOSER = "up.py"


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


def server_side_imports(path: Path) -> set[str]:
    return {m for m in imported_dxts_modules(path) if component_of(m) in SERVER_SIDE}


def test_only_dxts_up_imports_the_components() -> None:
    cli = REPO / PACKAGE_DIRS["dxts.cli"]
    violations = [
        f"{path.relative_to(REPO)} imports {module}"
        for path in sorted(cli.rglob("*.py"))
        if path.relative_to(cli).as_posix() != CLI_COMPOSER
        for module in sorted(server_side_imports(path))
    ]
    assert not violations, "\n".join(violations)


def test_the_cli_checker_sees_a_violation(tmp_path: Path) -> None:
    """A CLI module reaching into a service is caught; dxts.cwl and core are not violations."""
    offender = tmp_path / "m.py"
    offender.write_text(
        "from dxts.definition.submit import submit_workgraph\n"
        "import dxts.backends.local.adaptor\n"
        "from dxts.cwl.check import check_document\n"
        "from dxts.core.errors import NotFound\n"
    )
    assert server_side_imports(offender) == {
        "dxts.definition.submit",
        "dxts.backends.local.adaptor",
    }


# -- layers -------------------------------------------------------------------------------------

LAYERS = ("edge", "logic", "store")
# Layer → what its modules may not import: a module prefix, "{own}" standing for the component.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "logic": ("grpc", "dxts.v1"),
    "store": ("grpc", "dxts.v1", "{own}.logic", "{own}.edge"),
    "edge": ("sqlalchemy", "{own}.store"),
}


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports by absolute name, with `from a import b` also as `a.b` (so
    that `from dxts import v1` counts as importing dxts.v1)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def layer_violations(root: Path, own: str) -> list[str]:
    """What the modules under each layer folder of `root` (the package dir of `own`) import
    against that layer's rule."""
    violations = []
    for layer, rules in FORBIDDEN.items():
        banned = tuple(rule.format(own=own) for rule in rules)
        for path in sorted((root / layer).rglob("*.py")):
            for module in sorted(imported_modules(path)):
                if any(module == b or module.startswith(f"{b}.") for b in banned):
                    violations.append(f"{path.relative_to(root)} ({layer}) imports {module}")
    return violations


LAYERED = sorted(
    component
    for component, folder in PACKAGE_DIRS.items()
    if any((REPO / folder / layer).is_dir() for layer in LAYERS)
)


def test_the_definition_service_is_layered() -> None:
    assert "dxts.definition" in LAYERED


@pytest.mark.parametrize("component", LAYERED)
def test_layers_import_only_what_they_may(component: str) -> None:
    violations = layer_violations(REPO / PACKAGE_DIRS[component], component)
    assert not violations, "\n".join(violations)


def test_the_layer_checker_sees_a_violation(tmp_path: Path) -> None:
    for layer, source in {
        "logic": "import grpc\nfrom dxts import v1\n",
        "store": "from dxts.svc.logic.model import Thing\nfrom dxts.v1 import common_pb2\n",
        "edge": "import sqlalchemy as sa\nfrom dxts.svc.store import rows\n",
    }.items():
        (tmp_path / layer).mkdir()
        (tmp_path / layer / "m.py").write_text(source)
    (tmp_path / "component.py").write_text("import grpc\nfrom dxts.svc.store import rows\n")
    assert layer_violations(tmp_path, "dxts.svc") == [
        "logic/m.py (logic) imports dxts.v1",
        "logic/m.py (logic) imports grpc",
        "store/m.py (store) imports dxts.svc.logic.model",
        "store/m.py (store) imports dxts.svc.logic.model.Thing",
        "store/m.py (store) imports dxts.v1",
        "store/m.py (store) imports dxts.v1.common_pb2",
        "edge/m.py (edge) imports dxts.svc.store",
        "edge/m.py (edge) imports dxts.svc.store.rows",
        "edge/m.py (edge) imports sqlalchemy",
    ]


# -- the adaptors -------------------------------------------------------------------------------

# dxts.backends is the adaptor kit (`edge/`: the contract, covered by the layer rules above) and
# one package per adaptor, each laid out by module: its `store` (a module or a folder) holds the
# adaptor's own SQL, the process entry (`__main__`, `component`) serves it over the edge, and
# every other module is logic, on the contract's domain types. An adaptor imports the kit (the
# package's top-level modules, `edge/`, `runner/`), never another adaptor.
ADAPTOR_ENTRIES = {"__main__", "component"}
KIT_FOLDERS = {"edge", "runner"}
ADAPTOR_FORBIDDEN: dict[str, tuple[str, ...]] = {
    "logic": ("grpc", "dxts.v1", "sqlalchemy", "dxts.backends.edge"),
    "store": ("grpc", "dxts.v1", "dxts.backends.edge"),
    "entry": ("sqlalchemy",),
}


def adaptor_layer(relative: Path) -> str | None:
    """The layer of a module of dxts.backends by its path under the package (None: edge/)."""
    if relative.parts[0] == "edge":
        return None
    if relative.stem in ADAPTOR_ENTRIES:
        return "entry"
    return "store" if "store" in (relative.stem, *relative.parts[:-1]) else "logic"


def adaptor_violations(root: Path) -> list[str]:
    adaptors = {
        folder.name
        for folder in root.iterdir()
        if (folder / "__init__.py").is_file() and folder.name not in KIT_FOLDERS
    }
    violations = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        layer = adaptor_layer(relative)
        if layer is None:
            continue
        own = relative.parts[0] if len(relative.parts) > 1 else None
        others = tuple(f"dxts.backends.{a}" for a in sorted(adaptors - {own}))
        banned = ADAPTOR_FORBIDDEN[layer] + others
        for module in sorted(imported_modules(path)):
            if any(module == b or module.startswith(f"{b}.") for b in banned):
                violations.append(f"{path.relative_to(root)} ({layer}) imports {module}")
    return violations


def test_the_adaptors_are_layered() -> None:
    violations = adaptor_violations(REPO / PACKAGE_DIRS["dxts.backends"])
    assert not violations, "\n".join(violations)


def test_the_adaptor_checker_sees_a_violation(tmp_path: Path) -> None:
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "adaptor.py").write_text("import sqlalchemy\nfrom dxts.v1 import x\n")
    (tmp_path / "toy" / "store.py").write_text("import sqlalchemy\nimport grpc\n")
    (tmp_path / "toy" / "__main__.py").write_text("from dxts.backends.edge import servicer\n")
    (tmp_path / "toy" / "__init__.py").write_text("")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "__init__.py").write_text("")
    (tmp_path / "other" / "job.py").write_text("from dxts.backends.toy.adaptor import Toy\n")
    assert adaptor_violations(tmp_path) == [
        "other/job.py (logic) imports dxts.backends.toy.adaptor",
        "other/job.py (logic) imports dxts.backends.toy.adaptor.Toy",
        "toy/adaptor.py (logic) imports dxts.v1",
        "toy/adaptor.py (logic) imports dxts.v1.x",
        "toy/adaptor.py (logic) imports sqlalchemy",
        "toy/store.py (store) imports grpc",
    ]
