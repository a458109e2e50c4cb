"""The layout's import rules: components meet only through core and the generated contracts.

Each service, the dispatcher and the backends may import `dxts.core` and the generated stubs
(`dxts.v1`), never each other's modules; core imports nothing above itself. `dxts.cwl` (loading,
validating and compiling CWL, with no database and no gRPC) imports only core, and the
definition service and the CLI both use it. The CLI is a client: only `dxts up`, which composes
every component in one process, imports the services; it and the benchmarks are the composition
roots.

Within a component laid out in layers (`edge`, `logic`, `store`, as folders or modules, at any
depth: an adaptor's package in backends has its own), the rules say what each layer means, not
which modules it may name:
* the logic works on domain types: it imports no gRPC, no generated messages, no SQL toolkit and
  no database driver, and names no database dialect (no `is_sqlite` branch, no MySQL error
  code): what differs between databases is the store's, or core's;
* the store is SQL only: it imports neither the transport nor the layers above it, and hands
  typed records up, never the database's rows;
* the edge maps and forwards: it imports no SQL toolkit nor the store, and reads no SQL column.
"""

from __future__ import annotations

import ast
import re
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from dxts.core.schema import metadata

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
        "import dxts.backends.local.logic.adaptor\n"
        "from dxts.cwl.check import check_document\n"
        "from dxts.core.errors import NotFound\n"
    )
    assert server_side_imports(offender) == {
        "dxts.definition.submit",
        "dxts.backends.local.logic.adaptor",
    }


# -- layers -------------------------------------------------------------------------------------
#
# A layer is a folder named edge/, logic/ or store/, or a module named edge.py, logic.py or
# store.py, at any depth of a component: the services lay theirs out at the top, an adaptor in
# backends inside its own package. "{own}" stands for the package holding the layer.

LAYERS = ("edge", "logic", "store")
# The database drivers and SQL toolkit: only stores (and core) speak to the database.
DATABASE = ("sqlalchemy", "asyncmy", "aiosqlite", "pymysql", "MySQLdb", "aiomysql", "sqlite3")
# The transport: only edges (and core's gRPC scaffolding) speak gRPC and the contracts.
TRANSPORT = ("grpc", "dxts.v1", "dxts.core.grpc")
# Layer → what its modules may not import (a module prefix).
# Logic reaches what it drives (another service, a batch system, an HTTP API) through what it
# is given (a protocol its edge implements), never by importing its own edge.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "logic": (*TRANSPORT, *DATABASE, "{own}.edge"),
    "store": (*TRANSPORT, "{own}.logic", "{own}.edge"),
    "edge": (*DATABASE, "{own}.store"),
}
# Words that name a database product or its dialect: logic that spells one branches on the
# database or reads its error codes, which is the store's (or core's) business.
DIALECT_WORDS = re.compile(r"mysql|mariadb|sqlite|dialect", re.IGNORECASE)
# A SQL column by name: every column of the schema.
COLUMNS = frozenset(column.name for table in metadata.tables.values() for column in table.columns)
# What a store function may not return: rows as the database hands them over.
UNTYPED = frozenset({"Any", "Row", "RowMapping", "Result", "CursorResult"})
CONTAINERS = frozenset(
    {"list", "dict", "tuple", "set", "frozenset", "Sequence", "Mapping", "Iterable", "Iterator"}
)


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


def layer_modules(root: Path, own: str) -> Iterator[tuple[str, str, Path]]:
    """(layer, the package holding it, module) for every module of a layer under `root`, the
    package directory of `own`."""
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        for depth, part in enumerate(parts):
            name = part.removesuffix(".py")
            if name in LAYERS and (depth < len(parts) - 1 or part.endswith(".py")):
                yield name, ".".join((own, *parts[:depth])), path
                break


def dialect_words(path: Path) -> set[str]:
    """The identifiers (and string constants) of `path` naming a database dialect."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.alias):
            words = [node.name, node.asname or ""]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            words = [node.name]
        elif isinstance(node, ast.arg):
            words = [node.arg]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = [node.value] if DIALECT_WORDS.fullmatch(node.value) else []
        else:
            words = []
        found.update(word for word in words if DIALECT_WORDS.search(word))
    return found


def columns_read(path: Path) -> set[str]:
    """The SQL columns `path` reads off a row: `row.Column`, `row["Column"]`,
    `getattr(row, "Column")`. A generated message named like a table (`definition_pb2.Action`)
    and a function called by a column's name are not reads."""
    tree = ast.parse(path.read_text(), filename=str(path))
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in COLUMNS and id(node) not in called:
            if not (isinstance(node.value, ast.Name) and node.value.id.endswith("_pb2")):
                found.add(node.attr)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if node.slice.value in COLUMNS:
                found.add(str(node.slice.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in COLUMNS
        ):
            found.add(str(node.args[1].value))
    return found


def _json_object(node: ast.expr) -> bool:
    """`dict[str, Any]` or `Mapping[str, Any]`: a JSON document, which is a value, not a row."""
    return (
        isinstance(node, ast.Subscript)
        and ast.unparse(node.value) in {"dict", "Mapping"}
        and isinstance(node.slice, ast.Tuple)
        and [ast.unparse(element) for element in node.slice.elts] == ["str", "Any"]
    )


def _names_rows(node: ast.expr) -> bool:
    """Whether an annotation holds rows: `Any` or a row type, itself or inside a container (a
    SQL expression's type parameter, `sa.Column[Any]`, is no row)."""
    if _json_object(node):
        return False
    if isinstance(node, ast.Name | ast.Attribute):
        return (node.id if isinstance(node, ast.Name) else node.attr) in UNTYPED
    if isinstance(node, ast.BinOp):
        return _names_rows(node.left) or _names_rows(node.right)
    if isinstance(node, ast.Tuple):
        return any(_names_rows(element) for element in node.elts)
    if isinstance(node, ast.Subscript):
        base = node.value.id if isinstance(node.value, ast.Name) else ast.unparse(node.value)
        if base.rpartition(".")[2] in UNTYPED:
            return True
        return base in CONTAINERS and _names_rows(node.slice)
    return False


def untyped_returns(path: Path) -> list[str]:
    """The public functions of `path` whose declared result holds untyped rows (`Any` other
    than as a JSON document's values, or the SQL toolkit's row and result types)."""
    return [
        node.name
        for node in ast.parse(path.read_text(), filename=str(path)).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("_")
        and node.returns is not None
        and _names_rows(node.returns)
    ]


def layer_violations(root: Path, own: str) -> list[str]:
    """What the modules of each layer under `root` (the package dir of `own`) do against that
    layer's rules."""
    violations = []
    for layer, package, path in layer_modules(root, own):
        where = f"{path.relative_to(root)} ({layer})"
        banned = tuple(rule.format(own=package) for rule in FORBIDDEN[layer])
        for module in sorted(imported_modules(path)):
            if any(module == b or module.startswith(f"{b}.") for b in banned):
                violations.append(f"{where} imports {module}")
        if layer == "logic":
            violations.extend(f"{where} names {w}" for w in sorted(dialect_words(path)))
        if layer == "edge":
            violations.extend(f"{where} reads column {c}" for c in sorted(columns_read(path)))
        if layer == "store":
            violations.extend(f"{where} returns rows from {f}" for f in untyped_returns(path))
    return violations


LAYERED = sorted(
    component
    for component, folder in PACKAGE_DIRS.items()
    if any(layer_modules(REPO / folder, component))
)


def test_the_definition_service_is_layered() -> None:
    assert "dxts.definition" in LAYERED


# Fields of another system's API that an edge handles under a name a dxts column also has, by
# component: a JSON document's keys, not SQL (DiracX's REST API names a job's fields as DIRAC's
# database does). A stale entry fails the test.
FOREIGN_FIELDS: dict[str, set[str]] = {
    "dxts.backends": {"diracx/edge/client.py:Status"},
}
EXEMPTABLE = re.compile(
    r"(?P<module>\S+) \((?:store\) returns rows from|edge\) reads column) (?P<name>\w+)"
)


@pytest.mark.parametrize("component", LAYERED)
def test_layers_keep_their_rules(component: str) -> None:
    exempt = FOREIGN_FIELDS.get(component, set())
    violations, exempted = [], set()
    for violation in layer_violations(REPO / PACKAGE_DIRS[component], component):
        found = EXEMPTABLE.fullmatch(violation)
        key = f"{found['module']}:{found['name']}" if found else ""
        if key in exempt:
            exempted.add(key)
        else:
            violations.append(violation)
    assert not violations, "\n".join(violations)
    assert exempted == exempt, f"no longer found, take off FOREIGN_FIELDS: {exempt - exempted}"


def test_every_exemption_names_a_layered_component() -> None:
    assert set(FOREIGN_FIELDS) <= set(LAYERED)


def test_the_layer_checker_sees_a_violation(tmp_path: Path) -> None:
    for layer, source in {
        "logic": "import grpc\nfrom dxts import v1\nfrom dxts.svc.edge.client import Client\n",
        "store": "from dxts.svc.logic.model import Thing\nfrom dxts.v1 import common_pb2\n",
        "edge": "import sqlalchemy as sa\nfrom dxts.svc.store import rows\n",
    }.items():
        (tmp_path / layer).mkdir()
        (tmp_path / layer / "m.py").write_text(source)
    (tmp_path / "component.py").write_text("import grpc\nfrom dxts.svc.store import rows\n")
    assert layer_violations(tmp_path, "dxts.svc") == [
        "edge/m.py (edge) imports dxts.svc.store",
        "edge/m.py (edge) imports dxts.svc.store.rows",
        "edge/m.py (edge) imports sqlalchemy",
        "logic/m.py (logic) imports dxts.svc.edge.client",
        "logic/m.py (logic) imports dxts.svc.edge.client.Client",
        "logic/m.py (logic) imports dxts.v1",
        "logic/m.py (logic) imports grpc",
        "store/m.py (store) imports dxts.svc.logic.model",
        "store/m.py (store) imports dxts.svc.logic.model.Thing",
        "store/m.py (store) imports dxts.v1",
        "store/m.py (store) imports dxts.v1.common_pb2",
    ]


def test_the_layer_checker_sees_the_database_in_logic(tmp_path: Path) -> None:
    """Logic reaching the database by any road is caught: the SQL toolkit, a driver, core's
    gRPC scaffolding, a dialect branch, a MySQL error code."""
    (tmp_path / "logic").mkdir()
    (tmp_path / "logic" / "m.py").write_text(
        "from sqlalchemy.ext.asyncio import AsyncConnection\n"
        "import asyncmy\n"
        "from dxts.core.grpc.auth import bearer_token\n"
        "from dxts.core.db import mysql_error_code\n"
        "DUPLICATE = 1062\n"
        "def lanes(database, wanted):\n"
        "    return 1 if database.is_sqlite else wanted\n"
        "def which(database):\n"
        "    return database.dialect_name == 'mariadb'\n"
    )
    assert layer_violations(tmp_path, "dxts.svc") == [
        "logic/m.py (logic) imports asyncmy",
        "logic/m.py (logic) imports dxts.core.grpc.auth",
        "logic/m.py (logic) imports dxts.core.grpc.auth.bearer_token",
        "logic/m.py (logic) imports sqlalchemy.ext.asyncio",
        "logic/m.py (logic) imports sqlalchemy.ext.asyncio.AsyncConnection",
        "logic/m.py (logic) names dialect_name",
        "logic/m.py (logic) names is_sqlite",
        "logic/m.py (logic) names mariadb",
        "logic/m.py (logic) names mysql_error_code",
    ]


def test_the_layer_checker_sees_an_edge_reading_columns(tmp_path: Path) -> None:
    """An edge reading a row's column, by attribute, key or getattr, is caught; a generated
    message named like a table, and a record's own fields, are not."""
    (tmp_path / "edge").mkdir()
    (tmp_path / "edge" / "m.py").write_text(
        "def reply(row, record):\n"
        "    message = definition_pb2.Action(action_id=record.action_id)\n"
        "    return row.TransformationID, row['LFN'], getattr(row, 'Status'), message\n"
    )
    assert layer_violations(tmp_path, "dxts.svc") == [
        "edge/m.py (edge) reads column LFN",
        "edge/m.py (edge) reads column Status",
        "edge/m.py (edge) reads column TransformationID",
    ]


def test_the_layer_checker_sees_a_store_returning_rows(tmp_path: Path) -> None:
    """A store function handing up the database's rows is caught; typed records, scalars, JSON
    documents and private helpers are not."""
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "m.py").write_text(
        "async def one(conn) -> Any: ...\n"
        "async def some(conn) -> list[sa.Row[Any]]: ...\n"
        "async def by_id(conn) -> dict[bytes, Any]: ...\n"
        "async def typed(conn) -> list[InputRecord]: ...\n"
        "async def document(conn) -> dict[str, Any] | None: ...\n"
        "async def count(conn) -> int: ...\n"
        "def id_column(kind) -> tuple[sa.Table, sa.Column[Any]]: ...\n"
        "async def _helper(conn) -> Any: ...\n"
    )
    assert layer_violations(tmp_path, "dxts.svc") == [
        "store/m.py (store) returns rows from one",
        "store/m.py (store) returns rows from some",
        "store/m.py (store) returns rows from by_id",
    ]


def test_the_layer_checker_finds_layers_at_any_depth(tmp_path: Path) -> None:
    """An adaptor laid out inside its own package (backends' `local/edge/`, `local/store.py`)
    is held to the same rules, "its own" layers being its package's."""
    (tmp_path / "local" / "logic").mkdir(parents=True)
    (tmp_path / "local" / "logic" / "m.py").write_text("import aiosqlite\n")
    (tmp_path / "local" / "store.py").write_text("from dxts.svc.local.edge import servicer\n")
    (tmp_path / "local" / "runner.py").write_text("import sqlalchemy\nimport grpc\n")
    assert layer_violations(tmp_path, "dxts.svc") == [
        "local/logic/m.py (logic) imports aiosqlite",
        "local/logic/m.py (logic) names aiosqlite",
        "local/store.py (store) imports dxts.svc.local.edge",
        "local/store.py (store) imports dxts.svc.local.edge.servicer",
    ]


def banned_imports(path: Path, banned: tuple[str, ...]) -> list[str]:
    return sorted(
        module
        for module in imported_modules(path)
        if any(module == b or module.startswith(f"{b}.") for b in banned)
    )


def test_the_cwl_front_end_needs_no_transport_nor_database() -> None:
    """Loading, validating and compiling a document runs without a server and a database: it
    reads deadlines from `dxts.core.deadlines`, never from the gRPC scaffolding."""
    cwl = REPO / PACKAGE_DIRS["dxts.cwl"]
    violations = [
        f"{path.relative_to(cwl)} imports {module}"
        for path in sorted(cwl.rglob("*.py"))
        for module in banned_imports(path, (*TRANSPORT, *DATABASE))
    ]
    assert not violations, "\n".join(violations)


def test_the_cwl_checker_sees_a_violation(tmp_path: Path) -> None:
    offender = tmp_path / "m.py"
    offender.write_text(
        "from dxts.core.grpc.deadlines import checkpoint\n"
        "from dxts.core.deadlines import deadline\n"
    )
    assert banned_imports(offender, (*TRANSPORT, *DATABASE)) == [
        "dxts.core.grpc.deadlines",
        "dxts.core.grpc.deadlines.checkpoint",
    ]


# -- the adaptors -------------------------------------------------------------------------------

# dxts.backends is the adaptor kit and one package per adaptor, each laid out like the services:
# `logic/`, `store/` (its own SQL) and `edge/` (the system it drives, reached over the network or
# its commands) where it has them, held to the layer rules above; and at its top its public entry
# points (`__main__`, `plugin`, `settings`, a module a node or a worker runs), outside the
# layers. The kit is `edge/` (the contract's servicer and the dispatcher client), `logic/`,
# `store/`, `runner/` (the cwltool runner) and, at its top, `component` and `plugins`.
# An adaptor imports the kit, never another adaptor; the kit imports no adaptor.
KIT_FOLDERS = {*LAYERS, "runner"}
# Role of a module of dxts.backends (a layer, or "outside" the layers) → what it may not import,
# beyond the layer rules: an adaptor's logic and store never see the kit's gRPC edge (the edge
# serves them), and nothing outside a store reaches the database.
ADAPTOR_FORBIDDEN: dict[str, tuple[str, ...]] = {
    "logic": ("dxts.backends.edge",),
    "store": ("dxts.backends.edge",),
    "edge": (),
    "outside": DATABASE,
}


def backend_role(relative: Path) -> str:
    """The layer of a module of dxts.backends by its path under the package, as the layer rules
    find it (the first folder or module named after a layer), or "outside"."""
    for depth, part in enumerate(relative.parts):
        if part.removesuffix(".py") in LAYERS and (
            depth < len(relative.parts) - 1 or part.endswith(".py")
        ):
            return part.removesuffix(".py")
    return "outside"


def adaptor_packages(root: Path) -> set[str]:
    """The adaptors under `root` (dxts.backends' folder): every package but the kit's folders."""
    return {
        folder.name
        for folder in root.iterdir()
        if (folder / "__init__.py").is_file() and folder.name not in KIT_FOLDERS
    }


def adaptor_violations(root: Path) -> list[str]:
    adaptors = adaptor_packages(root)
    violations = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        role = backend_role(relative)
        own = relative.parts[0] if len(relative.parts) > 1 else None
        others = tuple(f"dxts.backends.{a}" for a in sorted(adaptors - {own}))
        banned = ADAPTOR_FORBIDDEN[role] + others
        for module in sorted(imported_modules(path)):
            if any(module == b or module.startswith(f"{b}.") for b in banned):
                violations.append(f"{relative} ({role}) imports {module}")
    return violations


def test_the_adaptors_are_layered() -> None:
    violations = adaptor_violations(REPO / PACKAGE_DIRS["dxts.backends"])
    assert not violations, "\n".join(violations)


def test_every_adaptor_has_its_logic_under_the_layer_rules() -> None:
    """Each adaptor package, and the kit, holds a `logic/` the layer rules find as its own."""
    root = REPO / PACKAGE_DIRS["dxts.backends"]
    found = {(layer, package) for layer, package, _ in layer_modules(root, "dxts.backends")}
    packages = ["dxts.backends", *(f"dxts.backends.{a}" for a in adaptor_packages(root))]
    assert {("logic", package) for package in packages} <= found


def test_the_layer_rules_catch_a_violation_in_an_adaptor(tmp_path: Path) -> None:
    """The real backends tree with an adaptor's logic reaching gRPC and the database, and its
    store reaching its logic: the layer rules catch each, as they do in a service."""
    backends = tmp_path / "backends"
    shutil.copytree(
        REPO / PACKAGE_DIRS["dxts.backends"],
        backends,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    before = set(layer_violations(backends, "dxts.backends"))
    with (backends / "slurm" / "logic" / "adaptor.py").open("a") as module:
        module.write("import grpc\nfrom sqlalchemy.ext.asyncio import AsyncConnection\n")
    with (backends / "diracx" / "store" / "state.py").open("a") as module:
        module.write("from dxts.backends.diracx.logic import jdl\n")
    with (backends / "diracx" / "logic" / "adaptor.py").open("a") as module:
        module.write("from dxts.backends.diracx.edge.client import DiracXClient\n")
    assert [v for v in layer_violations(backends, "dxts.backends") if v not in before] == [
        "diracx/logic/adaptor.py (logic) imports dxts.backends.diracx.edge.client",
        "diracx/logic/adaptor.py (logic) imports dxts.backends.diracx.edge.client.DiracXClient",
        "diracx/store/state.py (store) imports dxts.backends.diracx.logic",
        "diracx/store/state.py (store) imports dxts.backends.diracx.logic.jdl",
        "slurm/logic/adaptor.py (logic) imports grpc",
        "slurm/logic/adaptor.py (logic) imports sqlalchemy.ext.asyncio",
        "slurm/logic/adaptor.py (logic) imports sqlalchemy.ext.asyncio.AsyncConnection",
    ]


def test_the_adaptor_checker_sees_a_violation(tmp_path: Path) -> None:
    for folder in ("toy", "toy/logic", "toy/store", "other", "other/logic"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "toy" / "logic" / "adaptor.py").write_text(
        "from dxts.backends.edge.servicer import adaptor_service\n"
    )
    (tmp_path / "toy" / "store" / "state.py").write_text("from dxts.backends.edge import x\n")
    (tmp_path / "toy" / "settings.py").write_text("import sqlalchemy\n")
    (tmp_path / "toy" / "__main__.py").write_text("from dxts.backends.edge import servicer\n")
    (tmp_path / "other" / "logic" / "job.py").write_text(
        "from dxts.backends.toy.logic.adaptor import Toy\n"
    )
    (tmp_path / "plugins.py").write_text("import dxts.backends.toy.plugin\n")
    assert adaptor_violations(tmp_path) == [
        "other/logic/job.py (logic) imports dxts.backends.toy.logic.adaptor",
        "other/logic/job.py (logic) imports dxts.backends.toy.logic.adaptor.Toy",
        "plugins.py (outside) imports dxts.backends.toy.plugin",
        "toy/logic/adaptor.py (logic) imports dxts.backends.edge.servicer",
        "toy/logic/adaptor.py (logic) imports dxts.backends.edge.servicer.adaptor_service",
        "toy/settings.py (outside) imports sqlalchemy",
        "toy/store/state.py (store) imports dxts.backends.edge",
        "toy/store/state.py (store) imports dxts.backends.edge.x",
    ]
