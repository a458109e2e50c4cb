"""Table ownership: each table is written only by its owning component, and read by others
only where this file declares it, with the reason.

The scan reads every module of every component and finds the table each `insert`, `update`,
`delete` (SQLAlchemy constructs, `sa.insert(t)` or `t.insert()`) acts on, resolving the names
imported from `dxts.core.schema`. Append-only rows (journals, logs) and content-addressed rows
are written only through core's library functions, so they belong to core's writers here.

Reads: a module that names a schema table at all (in a select, a join, a column) uses it. A
component may use the tables it writes, and another side's only through that side's contract,
or as one of the `DECLARED_READS` below. An undeclared read fails, and so does a declaration
nothing needs any more, so the list stays the true list of the couplings the schema carries.

Locks: a `with_for_update` statement naming another side's table is a lock on that side's rows,
declared in `DECLARED_LOCKS` with its reason (and failing when stale) like a read.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from dxts.core.schema import metadata

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
    "package-dir"
]

DEFINITION = {
    "Workgraphs",
    "Ownership",
    "Transformations",
    "ComputeTransformations",
    "TransformationOutputs",
    "Processes",
    "ProcessReferences",
    "ProcessRegistry",
    "Requirements",
    "ResolvedHints",
    "Actions",
}
EXECUTION = {
    "Inputs",
    "Parcels",
    "UserParcels",
    "ComputeParcels",
    "DataParcels",
    "DataParcelDeltas",
    "ParcelInputs",
    "ParcelOutputs",
    "OutputWatermarks",
    "FeederStates",
}
DISPATCHER = {
    "Parcels",
    "DiracXIDs",
    "GlideInIDs",
    "BackendIDs",
    # ResolvedHintsID only: the sidecar the dispatcher resolves (a ComputeParcels column).
    "ComputeParcels",
}

# What each component may write. Core holds the library functions other components call inside
# their own transactions (journal, log, content-addressed put-if-absent, counter maintenance).
MAY_WRITE: dict[str, set[str] | None] = {
    "dxts.core": None,  # checked by the rule below: only append-only and content-addressed rows
    "dxts.cwl": set(),  # no database at all
    "dxts.definition": DEFINITION,
    "dxts.execution": EXECUTION,
    "dxts.accounting": set(),  # counters and logs are written through core's construct
    "dxts.dispatcher": DISPATCHER,
    "dxts.backends": set(),
    "dxts.cli": set(),
    "dxts.bench": None,  # benchmarks build their own data sets
    "dxts.v1": set(),
    "dxts.web": set(),
}
CORE_WRITES = {
    "TransformationLog",
    "WorkgraphLog",
    "CounterLocks",
    "Processes",
    "ProcessReferences",
    "Requirements",
    "ResolvedHints",
} | {name for name in metadata.tables if name.endswith(("Counters", "CounterJournal"))}

WRITE_CALLS = {"insert", "update", "delete"}

LOGS = {"TransformationLog", "WorkgraphLog"}
# Reads across sides, each with its reason. Everything else crosses through a contract.
DECLARED_READS: dict[str, dict[str, str]] = {
    "dxts.accounting": {
        **{name: "accounting serves the logs every component appends" for name in LOGS},
    },
    "dxts.definition": {
        "WorkgraphLog": "a retried SubmitWorkgraph finds its workgraph by the request id its "
        "creation row carries",
        "FeederStates": "a feeder is on while its switch is on and it has not said NoMoreInputs: "
        "the drain guard and the commands read both in their own transaction",
    },
    "dxts.execution": {
        "Transformations": "a feeder's batch reads the operator's switch and the status under a "
        "shared lock, ordering it with their change; lineage names a file's producing step",
        "TransformationOutputs": "provenance finds which parcel produced a file by probing "
        "ParcelOutputs output by output, and only this table lists every declared output",
        "BackendIDs": "a parcel's description shows the identifier its backend gave it",
        "Requirements": "HandleFailedInput is shown the requirements a failed parcel was sent "
        "with (a retry rule raises them)",
    },
    "dxts.core": {
        **{
            name: "a counter's sources are the rows it counts: its rebuild and drift check "
            "(accounting's, through dxts.core.counters) recount them"
            for name in ("Inputs", "Parcels", "DataParcelDeltas")
        },
    },
    "dxts.dispatcher": {
        **{
            name: "the payload handed to a backend is read in the transaction that claims "
            "its parcel, so what is submitted is what was claimed"
            for name in ("ParcelInputs", "DataParcels", "DataParcelDeltas", "UserParcels")
        },
        **{
            name: "requirements are resolved against the content-addressed rows at claim time"
            for name in ("Requirements", "ResolvedHints")
        },
    },
}


def schema_variables() -> dict[str, str]:
    """Module-level variable name in dxts.core.schema.* → table name."""
    from dxts.core.schema import accounting, definition, execution

    found = {}
    for module in (definition, execution, accounting):
        for name, value in vars(module).items():
            table_name = getattr(value, "name", None)
            if table_name in metadata.tables and value is metadata.tables[table_name]:
                found[name] = table_name
    return found


def schema_names(tree: ast.AST, variables: dict[str, str]) -> tuple[dict[str, str], set[str]]:
    """Tables imported by name (local name → table) and schema modules imported whole."""
    local: dict[str, str] = {}  # a table imported by name
    modules: set[str] = set()  # a schema module imported (definition, execution, ...)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dxts.core.schema"):
            for alias in node.names:
                if alias.name in variables:
                    local[alias.asname or alias.name] = variables[alias.name]
                else:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dxts.core.schema"):
                    modules.add(alias.asname or alias.name.split(".")[0])
    return local, modules


def used_tables(path: Path, variables: dict[str, str]) -> set[str]:
    """Every table a module names: read, written or joined."""
    tree = ast.parse(path.read_text(), filename=str(path))
    local, modules = schema_names(tree, variables)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in local:
            used.add(local[node.id])
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr in variables
        ):
            used.add(variables[node.attr])
    return used


def written_tables(path: Path, variables: dict[str, str]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    local, modules = schema_names(tree, variables)

    def table_of(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            return local.get(expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name | ast.Attribute):
            base = expr.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                return variables.get(expr.attr)
        return None

    tables = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name not in WRITE_CALLS:
            continue
        target = None
        if node.args:
            target = table_of(node.args[0])  # sa.insert(table)
        if target is None and isinstance(func, ast.Attribute):
            target = table_of(func.value)  # table.insert()
        if target:
            tables.add(target)
    return tables


@pytest.mark.parametrize("component", sorted(PACKAGE_DIRS))
def test_components_write_only_what_they_own(component: str) -> None:
    allowed = MAY_WRITE[component]
    if component == "dxts.bench":
        return
    if allowed is None:
        allowed = CORE_WRITES
    variables = schema_variables()
    violations = []
    for path in sorted((REPO / PACKAGE_DIRS[component]).rglob("*.py")):
        for table in written_tables(path, variables) - allowed:
            violations.append(f"{path.relative_to(REPO)} writes {table}")
    assert not violations, "\n".join(violations)


def test_the_scanner_sees_writes(tmp_path: Path) -> None:
    offender = tmp_path / "m.py"
    offender.write_text(
        "import sqlalchemy as sa\n"
        "from dxts.core.schema.execution import inputs as i\n"
        "from dxts.core.schema import definition\n"
        "sa.update(i)\n"
        "definition.workgraphs.delete()\n"
        "sa.select(definition.actions)\n"
        "layer.actions.update({})\n"
    )
    assert written_tables(offender, schema_variables()) == {"Inputs", "Workgraphs"}


def owned_by(component: str) -> set[str]:
    """The tables `component` writes (core: the rows written through its library functions)."""
    allowed = MAY_WRITE[component]
    return CORE_WRITES if allowed is None else allowed


def reads_across_sides(component: str) -> dict[str, list[str]]:
    """Table → the modules of `component` that use it without owning it."""
    variables = schema_variables()
    owned = owned_by(component)
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / PACKAGE_DIRS[component]).rglob("*.py")):
        for table in sorted(used_tables(path, variables) - owned):
            found.setdefault(table, []).append(str(path.relative_to(REPO)))
    return found


# The benchmarks build their own data sets. Core is scanned like a component: beyond the rows
# it writes for every side, what it reads is declared.
READ_SCANNED = sorted(set(PACKAGE_DIRS) - {"dxts.bench"})


@pytest.mark.parametrize("component", READ_SCANNED)
def test_components_read_another_side_only_where_declared(component: str) -> None:
    declared = DECLARED_READS.get(component, {})
    found = reads_across_sides(component)
    undeclared = [
        f"{module} uses {table}"
        for table, modules in sorted(found.items())
        if table not in declared
        for module in modules
    ]
    assert not undeclared, (
        "reads across sides go through the owner's contract or are declared in "
        "DECLARED_READS with their reason:\n" + "\n".join(undeclared)
    )
    stale = sorted(set(declared) - set(found))
    assert not stale, f"declared reads {component} no longer makes: {stale}"


def test_the_scanner_sees_reads(tmp_path: Path) -> None:
    offender = tmp_path / "m.py"
    offender.write_text(
        "import sqlalchemy as sa\n"
        "from dxts.core.schema.execution import inputs as i\n"
        "from dxts.core.schema import definition\n"
        "sa.select(i.c.Status).join(definition.actions)\n"
        "layer.parcels.c.Status\n"
    )
    assert used_tables(offender, schema_variables()) == {"Inputs", "Actions"}


# Locks on another side's rows, each with its reason. A lock is more than a read: it orders the
# locker with the owner's writes, so the owner cannot change how it writes those rows without
# knowing. Every other lock is taken on rows the component owns.
DECLARED_LOCKS: dict[str, dict[str, str]] = {
    "dxts.execution": {
        "Transformations": "a feeder's batch reads the operator's switch under a shared lock, "
        "so that disabling the feeder waits for the batch or the batch sees it disabled",
    },
}


def locked_tables(path: Path, variables: dict[str, str]) -> set[str]:
    """Every table a `with_for_update` statement of the module names (the statement is the
    chain the call is made on: `sa.select(t.c.X).where(...).with_for_update()`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    local, modules = schema_names(tree, variables)
    tables = set()
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "with_for_update"
        ):
            continue
        for inner in ast.walk(node.func.value):
            if isinstance(inner, ast.Name) and inner.id in local:
                tables.add(local[inner.id])
            elif (
                isinstance(inner, ast.Attribute)
                and isinstance(inner.value, ast.Name)
                and inner.value.id in modules
                and inner.attr in variables
            ):
                tables.add(variables[inner.attr])
    return tables


@pytest.mark.parametrize("component", READ_SCANNED)
def test_components_lock_another_side_only_where_declared(component: str) -> None:
    variables = schema_variables()
    owned = owned_by(component)
    declared = DECLARED_LOCKS.get(component, {})
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / PACKAGE_DIRS[component]).rglob("*.py")):
        for table in sorted(locked_tables(path, variables) - owned):
            found.setdefault(table, []).append(str(path.relative_to(REPO)))
    undeclared = [
        f"{module} locks {table}"
        for table, modules in sorted(found.items())
        if table not in declared
        for module in modules
    ]
    assert not undeclared, (
        "a lock on another side's rows is declared in DECLARED_LOCKS with its reason:\n"
        + "\n".join(undeclared)
    )
    stale = sorted(set(declared) - set(found))
    assert not stale, f"declared locks {component} no longer takes: {stale}"


def test_the_scanner_sees_locks(tmp_path: Path) -> None:
    offender = tmp_path / "m.py"
    offender.write_text(
        "import sqlalchemy as sa\n"
        "from dxts.core.schema.definition import transformation_outputs as o\n"
        "from dxts.core.schema import execution\n"
        "sa.select(o.c.TransformationOutputID).where(o.c.Name == 'x').with_for_update()\n"
        "sa.select(execution.inputs).with_for_update(read=True)\n"
        "sa.select(execution.parcels)\n"
    )
    assert locked_tables(offender, schema_variables()) == {"TransformationOutputs", "Inputs"}
