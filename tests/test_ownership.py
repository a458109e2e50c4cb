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

Columns: on a table two sides write (Parcels, ComputeParcels), each insert, update and delete
is resolved to the columns it writes (`.values(Col=...)`, `.values({...})` or a local dict with
literal keys, executemany rows built from literal keys, `insert_rows(conn, table, rows)`); each
column has one writing side in `COLUMN_WRITERS` or is one of the `TRANSITION_COLUMNS` (Parcels
.Status and UpdatedAt, split by transition and held to it by tests/test_parcel_transitions.py),
and a statement whose columns cannot be told from the source fails until it is made explicit.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
from ast_assignments import values_assigned

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
    "WorkgraphHandles",
    "TransformationHandles",
    "WorkgraphQuotaLocks",
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
    "ParcelHandles",
    "DirectedParcels",
}
DISPATCHER = {
    "Parcels",
    "DiracXIDs",
    "GlideInIDs",
    "BackendIDs",
    "InFlightLocks",
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
        "creation row carries; a workgraph read for a person says when it was started (its first "
        "move out of New)",
        "FeederStates": "a feeder is on while its switch is on and it has not said NoMoreInputs: "
        "the drain guard and the commands read both in their own transaction",
        "Parcels": "attention: a member's last ended parcels (its failed-parcel rate, lost "
        "parcels, last progress), a bounded read on the (TransformationID, Status) index each "
        "time a workgraph or member is read",
        "Inputs": "attention: since when a member's Problematic inputs wait (one grouped read)",
        "TransformationLog": "attention: a member's recent packer failures, the PackerFailed "
        "rows execution appends (a round's or a flush's), read over a window on the "
        "(TransformationID, CreatedAt) index",
    },
    "dxts.execution": {
        "Transformations": "a feeder's batch reads the operator's switch and the status under a "
        "shared lock, ordering it with their change; lineage names a file's producing step; "
        "GroupFailures keeps no member whose rows cleaning may be deleting (its status)",
        "TransformationOutputs": "provenance finds which parcel produced a file by probing "
        "ParcelOutputs output by output, and only this table lists every declared output; the "
        "release of sets withheld for a partner finds the driving output's producer, ended or "
        "not (one primary-key read)",
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
        "DirectedParcels": "a claim takes a parcel execution directed to a backend only for that "
        "backend, so it reads the direction in the transaction that reserves the parcel",
        **{
            name: "requirements are resolved against the content-addressed rows at claim time"
            for name in ("Requirements", "ResolvedHints")
        },
        **{
            name: "a claim under a cap on each VO's parcels in flight finds a parcel's VO "
            "(its transformation's owner) in the transaction that counts and reserves"
            for name in ("Transformations", "Ownership")
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
    "dxts.dispatcher": {
        "DirectedParcels": "the claim's SKIP LOCKED read joins a parcel's direction, and a "
        "locking read locks every row it reads: the row of an Unassigned parcel, which "
        "execution writes only in the transaction creating the parcel and deletes only with it",
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


# -- writes per column, on the tables two sides write ---------------------------------------------

DELETE = "(delete)"  # a delete writes the whole row
ROWS_FUNCTIONS = {"insert_rows"}  # dxts.core.bulk.insert_rows(conn, table, rows): an insert


def shared_tables() -> set[str]:
    """The tables more than one component may write."""
    seen: dict[str, int] = {}
    for allowed in MAY_WRITE.values():
        for table in allowed or ():
            seen[table] = seen.get(table, 0) + 1
    return {table for table, count in seen.items() if count > 1}


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _scope(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST:
    """The function (or module) `node` is in."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node
    return node


def _keys(expr: ast.expr, scope: ast.AST, depth: int = 0) -> set[str] | None:
    """The column names a mapping expression holds: a dict literal with literal keys, or a
    local name every assignment of which is one (with `name["Col"] = ...` adding a key);
    None when they cannot be told from the source."""
    if depth > 5:
        return None
    if isinstance(expr, ast.Dict):
        found: set[str] = set()
        for key, value in zip(expr.keys, expr.values, strict=True):
            if key is None:  # {**other}
                inner = _keys(value, scope, depth + 1)
                if inner is None:
                    return None
                found |= inner
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.add(key.value)
            else:
                return None
        return found
    if isinstance(expr, ast.Name):
        assigned: list[ast.expr] = []
        added: set[str] = set()
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id == expr.id:
                        assigned.append(node.value)
                    elif (
                        isinstance(target, ast.Subscript)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == expr.id
                    ):
                        if not (
                            isinstance(target.slice, ast.Constant)
                            and isinstance(target.slice.value, str)
                        ):
                            return None
                        added.add(target.slice.value)
        if not assigned:
            return None
        found = set(added)
        for value in assigned:
            inner = _keys(value, scope, depth + 1)
            if inner is None:
                return None
            found |= inner
        return found
    return None


def _row_keys(expr: ast.expr, scope: ast.AST, depth: int = 0) -> set[str] | None:
    """The column names of executemany rows: a comprehension or list of mappings `_keys`
    resolves, or a local name assigned one."""
    if depth > 5:
        return None
    if isinstance(expr, ast.ListComp | ast.GeneratorExp):
        return _keys(expr.elt, scope)
    if isinstance(expr, ast.List) and expr.elts:
        found: set[str] = set()
        for element in expr.elts:
            inner = _keys(element, scope)
            if inner is None:
                return None
            found |= inner
        return found
    if isinstance(expr, ast.Name):
        values = values_assigned(scope, expr.id)
        if not values:
            return None
        found = set()
        for value in values:
            inner = _row_keys(value, scope, depth + 1)
            if inner is None:
                return None
            found |= inner
        return found
    return None


def _statement_columns(
    call: ast.Call, kind: str, parents: dict[ast.AST, ast.AST]
) -> set[str] | None:
    """The columns the statement built on `call` (`sa.insert(t)`, `t.update()`, ...) writes:
    its `.values(...)` anywhere along the chain, or for an insert without them the rows
    `conn.execute(statement, rows)` is given."""
    if kind == "delete":
        return {DELETE}
    scope = _scope(call, parents)
    found: set[str] = set()
    valued = False
    node: ast.AST = call
    while True:
        attribute = parents.get(node)
        outer = parents.get(attribute) if attribute is not None else None
        if not (
            isinstance(attribute, ast.Attribute)
            and isinstance(outer, ast.Call)
            and outer.func is attribute
        ):
            break
        if attribute.attr == "values":
            valued = True
            for keyword in outer.keywords:
                if keyword.arg is not None:
                    found.add(keyword.arg)
                else:
                    inner = _keys(keyword.value, scope)
                    if inner is None:
                        return None
                    found |= inner
            for argument in outer.args:
                inner = _keys(argument, scope)
                if inner is None:
                    return None
                found |= inner
        node = outer
    holder = parents.get(node)
    if isinstance(holder, ast.Assign | ast.AnnAssign):  # statement = sa.update(t)...
        targets = holder.targets if isinstance(holder, ast.Assign) else [holder.target]
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        if any(  # ...statement.values(...) later: not followed
            isinstance(later, ast.Attribute)
            and later.attr == "values"
            and isinstance(later.value, ast.Name)
            and later.value.id in names
            for later in ast.walk(scope)
        ):
            return None
    if valued:
        return found
    executing = parents.get(node)
    if (
        kind == "insert"
        and isinstance(executing, ast.Call)
        and len(executing.args) == 2
        and executing.args[0] is node
    ):
        return _row_keys(executing.args[1], scope)
    return None


def column_writes(path: Path, variables: dict[str, str]) -> list[tuple[str, set[str] | None, int]]:
    """(table, the columns written or None when they cannot be told, line) of every insert,
    update and delete of the module, `insert_rows(conn, table, rows)` included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    local, modules = schema_names(tree, variables)
    parents = _parents(tree)

    def table_of(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            return local.get(expr.id)
        if (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id in modules
        ):
            return variables.get(expr.attr)
        return None

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in ROWS_FUNCTIONS and len(node.args) >= 3:
            table = table_of(node.args[1])
            if table:
                found.append((table, _row_keys(node.args[2], _scope(node, parents)), node.lineno))
            continue
        if name not in WRITE_CALLS:
            continue
        table = table_of(node.args[0]) if node.args else None
        if table is None and isinstance(func, ast.Attribute):
            table = table_of(func.value)
        if table:
            found.append((table, _statement_columns(node, str(name), parents), node.lineno))
    return found


EXECUTION_SIDE, DISPATCHER_SIDE = "dxts.execution", "dxts.dispatcher"
# Which side writes each column of the tables two sides write (a delete writes the row), with
# the reason. Execution creates parcels (packing, user jobs, recovery parcels) with their
# compute facets and moves them from Assigned on; the dispatcher moves them Unassigned →
# Reserved → Assigned and back, and resolves hints. A write of a column not declared here, or
# by the other side, fails, and so does a declaration nothing writes any more.
COLUMN_WRITERS: dict[tuple[str, str], tuple[str, str]] = {
    **{
        ("Parcels", column): (EXECUTION_SIDE, "execution creates parcels")
        for column in ("ParcelID", "TransformationID", "Kind")
    },
    ("Parcels", "Annotations"): (
        EXECUTION_SIDE,
        "what a parcel carries: set when it is created, the outcome and reasons as execution "
        "records it",
    ),
    ("Parcels", "CompletedAt"): (EXECUTION_SIDE, "set when execution ends a parcel"),
    ("Parcels", DELETE): (EXECUTION_SIDE, "cleaning removes the parcels of a transformation"),
    **{
        ("ComputeParcels", column): (EXECUTION_SIDE, "execution creates a parcel's facet")
        for column in ("ParcelID", "ProcessID", "RequirementsID", "Parameters")
    },
    ("Parcels", "Backend"): (
        DISPATCHER_SIDE,
        "the backend the dispatcher reserves a parcel for, cleared when that backend refuses "
        "it; where execution directs a parcel is execution's own DirectedParcels row",
    ),
    ("ComputeParcels", "ResolvedHintsID"): (
        DISPATCHER_SIDE,
        "the sidecar the dispatcher resolves when it claims a parcel; a split's recovery "
        "parcel (never dispatched) shows its recovered parcel's, read through `recovery_of`",
    ),
}
# The columns both sides write, split by transition rather than by column: which side takes which
# move of a parcel is the parcel state machine's (its dispatcher edges and the others), and
# tests/test_parcel_transitions.py holds every statement of each side to its own moves. Nothing
# else is written by both sides.
TRANSITION_COLUMNS: dict[tuple[str, str], str] = {
    ("Parcels", "Status"): "the dispatcher moves Unassigned → Reserved → Assigned and Reserved → "
    "Unassigned; execution creates parcels and makes every other move (from Reserved or "
    "Assigned on, and cancellations), each a conditional UPDATE on the state it moves from",
    ("Parcels", "UpdatedAt"): "stamped by the statement that moves a parcel, whichever side "
    "takes the move; besides, the dispatcher renews its lease on a Reserved parcel it holds",
}
SIDES = (EXECUTION_SIDE, DISPATCHER_SIDE)


def shared_writes(component: str) -> tuple[dict[tuple[str, str], list[str]], list[str]]:
    """(table, column) → where `component` writes it, on the tables two sides write; and the
    statements whose columns the scan cannot tell."""
    variables = schema_variables()
    shared = shared_tables()
    found: dict[tuple[str, str], list[str]] = {}
    unresolved = []
    for path in sorted((REPO / PACKAGE_DIRS[component]).rglob("*.py")):
        for table, columns, line in column_writes(path, variables):
            where = f"{path.relative_to(REPO)}:{line}"
            if table not in shared:
                continue
            if columns is None:
                unresolved.append(f"{where} writes {table}: columns not literal")
                continue
            for column in columns:
                found.setdefault((table, column), []).append(where)
    return found, unresolved


def test_the_shared_tables_are_the_declared_ones() -> None:
    declared = {table for table, _ in COLUMN_WRITERS} | {table for table, _ in TRANSITION_COLUMNS}
    assert declared == shared_tables()
    assert not set(COLUMN_WRITERS) & set(TRANSITION_COLUMNS)
    assert {side for side, _ in COLUMN_WRITERS.values()} <= set(MAY_WRITE)


def column_violations(
    component: str,
    found: dict[tuple[str, str], list[str]],
    unresolved: list[str],
) -> list[str]:
    """What `component`'s writes of shared tables do against the declarations."""
    violations = list(unresolved)
    for key, places in sorted(found.items()):
        if key in TRANSITION_COLUMNS:
            continue
        owner = COLUMN_WRITERS.get(key, ("(undeclared)", ""))[0]
        if owner != component:
            violations.extend(
                f"{where} writes {key[0]}.{key[1]} (owner: {owner})" for where in places
            )
    return violations


@pytest.mark.parametrize("component", READ_SCANNED)
def test_shared_tables_are_written_column_by_column_as_declared(component: str) -> None:
    found, unresolved = shared_writes(component)
    violations = column_violations(component, found, unresolved)
    assert not violations, (
        "on a table two sides write, each column has one writer (COLUMN_WRITERS) or is split by "
        "transition (TRANSITION_COLUMNS); a statement's columns must be literal:\n"
        + "\n".join(violations)
    )


def stale_column_declarations(written: dict[str, set[tuple[str, str]]]) -> list[str]:
    """The declarations `written` (side → the (table, column) it writes) no longer bears out:
    a column writer that does not write it, a shared column one side alone writes."""
    stale = [
        f"{table}.{column}: {side} no longer writes it"
        for (table, column), (side, _) in sorted(COLUMN_WRITERS.items())
        if (table, column) not in written.get(side, set())
    ]
    stale.extend(
        f"{table}.{column}: split by transition, but not written by both sides"
        for table, column in sorted(TRANSITION_COLUMNS)
        if not all((table, column) in written.get(side, set()) for side in SIDES)
    )
    return stale


def test_no_column_declaration_is_stale() -> None:
    stale = stale_column_declarations({side: set(shared_writes(side)[0]) for side in SIDES})
    assert not stale, "\n".join(stale)


def test_the_scanner_sees_writes_per_column(tmp_path: Path) -> None:
    offender = tmp_path / "m.py"
    offender.write_text(
        "import sqlalchemy as sa\n"
        "from dxts.core.bulk import insert_rows\n"
        "from dxts.core.schema.execution import parcels as p, compute_parcels\n"
        "S = sa.update(p).where(p.c.ParcelID == 1).values(Status='Done', UpdatedAt=now)\n"
        "def f(conn, ids, given):\n"
        "    values = {'Status': 'Assigned'}\n"
        "    values['CompletedAt'] = now\n"
        "    sa.update(p).values(values)\n"
        "    rows = [{'ParcelID': i, 'Kind': 'Data'} for i in ids]\n"
        "    insert_rows(conn, p, rows)\n"
        "    conn.execute(sa.insert(compute_parcels), [{'ParcelID': 1, 'ProcessID': 2}])\n"
        "    sa.delete(p).where(p.c.ParcelID.in_(ids))\n"
        "    sa.update(p).values(**given)\n"
        "    insert_rows(conn, compute_parcels, given)\n"
        "    statement = sa.update(compute_parcels)\n"
        "    statement.values(ResolvedHintsID=None)\n"
    )
    writes = [
        (table, sorted(columns) if columns is not None else None)
        for table, columns, _ in sorted(
            column_writes(offender, schema_variables()), key=lambda w: w[2]
        )
    ]
    assert writes == [
        ("Parcels", ["Status", "UpdatedAt"]),
        ("Parcels", ["CompletedAt", "Status"]),
        ("Parcels", ["Kind", "ParcelID"]),
        ("ComputeParcels", ["ParcelID", "ProcessID"]),
        ("Parcels", [DELETE]),
        ("Parcels", None),
        ("ComputeParcels", None),
        ("ComputeParcels", None),
    ]


def test_each_column_rule_catches_a_violation() -> None:
    """A column the other side owns, an undeclared column, an unresolvable statement: each
    fails; a column split by transition does not."""
    found = {
        ("Parcels", "CompletedAt"): ["d.py:1"],  # execution's
        ("Parcels", "Priority"): ["d.py:2"],  # declared nowhere
        ("Parcels", "Status"): ["d.py:3"],  # split by transition
    }
    assert column_violations(
        DISPATCHER_SIDE, found, ["d.py:4 writes Parcels: columns not literal"]
    ) == [
        "d.py:4 writes Parcels: columns not literal",
        "d.py:1 writes Parcels.CompletedAt (owner: dxts.execution)",
        "d.py:2 writes Parcels.Priority (owner: (undeclared))",
    ]
    written = {side: set(COLUMN_WRITERS) | set(TRANSITION_COLUMNS) for side in SIDES}
    written[DISPATCHER_SIDE].discard(("Parcels", "UpdatedAt"))
    written[EXECUTION_SIDE].discard(("Parcels", "CompletedAt"))
    assert stale_column_declarations(written) == [
        "Parcels.CompletedAt: dxts.execution no longer writes it",
        "Parcels.UpdatedAt: split by transition, but not written by both sides",
    ]
