"""Parcels.Status and Parcels.UpdatedAt, the two columns both the dispatcher and execution write,
split by transition: which side takes which move is derived from the parcel state machine
(`dxts.core.state_machines.PARCEL`), and every statement of each side is held to its moves.

- The machine splits: no edge is taken both by the dispatcher and by anyone else. The
  dispatcher's edges are those `Actor.DISPATCHER` takes; execution applies all the others (every
  one of them names `Actor.CORE`, the core applying a plugin's or an operator's request).
- The dispatcher: each statement writing Parcels.Status is an UPDATE whose WHERE names the
  state it moves from and whose VALUES the state it moves to, both read from the source; each
  is one of its edges, and each of its edges is made somewhere (a stale edge fails).
- Execution: each statement writing Parcels.Status is an INSERT creating a parcel in a state the
  machine creates parcels in, an UPDATE from and to literal states along one of its edges, or
  the conditional UPDATE of a mover in `RUNTIME_CHECKED`, whose moves come from its callers and
  which checks each against the machine before writing (proved below: it refuses the
  dispatcher's move and writes nothing).
- UpdatedAt is the stamp of the transition: a statement writing it writes Status too, except
  the dispatcher's renewal of its lease on a parcel it holds, an UPDATE conditional on Status =
  Reserved that no other statement of either side writes.

The scan shares tests/test_ownership.py's resolution of the columns a statement writes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from ast_assignments import values_assigned
from test_ownership import (
    DISPATCHER_SIDE,
    EXECUTION_SIDE,
    PACKAGE_DIRS,
    REPO,
    ROWS_FUNCTIONS,
    TRANSITION_COLUMNS,
    _parents,
    _row_keys,
    _scope,
    _statement_columns,
    schema_names,
    schema_variables,
)

from dxts.core.errors import InvalidTransition
from dxts.core.ids import new_id
from dxts.core.state_machines import PARCEL, Actor
from dxts.core.states import ParcelStatus
from dxts.execution.store.outcomes import ParcelMove, ParcelRow, move_parcels

TABLE = "Parcels"
RESERVED = ParcelStatus.RESERVED.value

# Execution's movers whose moves come from their callers: each checks every move against the
# machine, as execution's, before it writes (module, function).
RUNTIME_CHECKED = {
    ("services/execution/dxts/execution/store/outcomes.py", "move_parcels"),
    ("services/execution/dxts/execution/store/outcomes.py", "_annotating_move"),
}


def dispatcher_edges() -> set[tuple[str | None, str]]:
    return {(e.source, e.target) for e in PARCEL.edges if Actor.DISPATCHER in e.actors}


def execution_edges() -> set[tuple[str | None, str]]:
    return {(e.source, e.target) for e in PARCEL.edges if Actor.DISPATCHER not in e.actors}


@dataclass(frozen=True)
class StatusWrite:
    """One statement writing Parcels.Status or UpdatedAt, as the source spells it."""

    where: str  # path:line
    function: str  # the function it is in ("" at module level)
    kind: str  # insert, update
    columns: frozenset[str]
    sources: frozenset[str] | None  # the states its WHERE requires; None: not read from source
    target: str | None  # the state it writes; None: not read from the source (or no Status)


def _state(expr: ast.expr, namespace: dict[str, Any]) -> str | None:
    """The parcel state an expression names (a literal, `ParcelStatus.X`, a constant of the
    module or one it imports), or None when it is not a name the module holds."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if not all(isinstance(node, ast.Name | ast.Attribute | ast.Load) for node in ast.walk(expr)):
        return None
    try:
        value = eval(compile(ast.Expression(expr), "<state>", "eval"), dict(namespace))
    except (NameError, AttributeError):
        return None
    value = getattr(value, "value", value)
    return value if isinstance(value, str) and value in PARCEL.states else None


def _states(expr: ast.expr, namespace: dict[str, Any]) -> frozenset[str] | None:
    if isinstance(expr, ast.List | ast.Tuple | ast.Set):
        found = [_state(element, namespace) for element in expr.elts]
        return None if None in found else frozenset(s for s in found if s)
    state = _state(expr, namespace)
    return frozenset({state}) if state else None


def _is_status(expr: ast.expr) -> bool:
    """`<table>.c.Status` (the column, whatever the table is called locally)."""
    return isinstance(expr, ast.Attribute) and expr.attr == "Status"


def _chain(call: ast.Call, parents: dict[ast.AST, ast.AST]) -> Iterator[ast.Call]:
    """The calls chained on `call`: `.where(...)`, `.values(...)`, ..."""
    node: ast.AST = call
    while True:
        attribute = parents.get(node)
        outer = parents.get(attribute) if attribute is not None else None
        if not (
            isinstance(attribute, ast.Attribute)
            and isinstance(outer, ast.Call)
            and outer.func is attribute
        ):
            return
        yield outer
        node = outer


def _sources(call: ast.Call, parents: dict[ast.AST, ast.AST], namespace: dict[str, Any]) -> Any:
    """The states the statement's WHERE requires of Status (`== X`, `.in_([X, Y])`); None when
    it names a state the source does not spell, an empty set when it names none."""
    found: set[str] = set()
    for link in _chain(call, parents):
        assert isinstance(link.func, ast.Attribute)
        if link.func.attr != "where":
            continue
        for condition in link.args:
            states: frozenset[str] | None = frozenset()
            if (
                isinstance(condition, ast.Compare)
                and len(condition.ops) == 1
                and isinstance(condition.ops[0], ast.Eq)
                and _is_status(condition.left)
            ):
                states = _states(condition.comparators[0], namespace)
            elif (
                isinstance(condition, ast.Call)
                and isinstance(condition.func, ast.Attribute)
                and condition.func.attr == "in_"
                and _is_status(condition.func.value)
                and condition.args
            ):
                states = _states(condition.args[0], namespace)
            if states is None:
                return None
            found |= states
    return frozenset(found)


def _mappings(expr: ast.expr, scope: ast.AST, depth: int = 0) -> list[ast.Dict] | None:
    """The dict literals a mapping or rows expression is built from (`{...}`, a comprehension
    of one, a list of them, a local name assigned one); None when they cannot be told."""
    if depth > 5:
        return None
    if isinstance(expr, ast.Dict):
        return [expr]
    if isinstance(expr, ast.ListComp | ast.GeneratorExp):
        return _mappings(expr.elt, scope, depth + 1)
    if isinstance(expr, ast.List):
        found: list[ast.Dict] = []
        for element in expr.elts:
            inner = _mappings(element, scope, depth + 1)
            if inner is None:
                return None
            found.extend(inner)
        return found
    if isinstance(expr, ast.Name):
        values = values_assigned(scope, expr.id)
        if not values:
            return None
        found = []
        for value in values:
            inner = _mappings(value, scope, depth + 1)
            if inner is None:
                return None
            found.extend(inner)
        return found
    return None


def _target(
    value_sources: list[ast.expr], keywords: list[ast.keyword], scope: ast.AST, ns: dict[str, Any]
) -> str | None:
    """The state written to Status: `Status=X`, or `"Status": X` in the mappings given."""
    targets: set[str | None] = set()
    for keyword in keywords:
        if keyword.arg == "Status":
            targets.add(_state(keyword.value, ns))
    for source in value_sources:
        for mapping in _mappings(source, scope) or [None]:  # type: ignore[list-item]
            if mapping is None:
                return None
            for key, value in zip(mapping.keys, mapping.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "Status":
                    targets.add(_state(value, ns))
    return targets.pop() if len(targets) == 1 else None


def status_writes(component: str) -> list[StatusWrite]:
    """Every statement of `component` that writes Parcels.Status or UpdatedAt."""
    variables = schema_variables()
    root = REPO / PACKAGE_DIRS[component]
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        local, modules = schema_names(tree, variables)
        parents = _parents(tree)
        dotted = ".".join((component, *path.relative_to(root).with_suffix("").parts))
        namespace = vars(import_module(dotted.removesuffix(".__init__")))

        def is_parcels(
            expr: ast.expr, local: dict[str, str] = local, modules: set[str] = modules
        ) -> bool:
            if isinstance(expr, ast.Name):
                return local.get(expr.id) == TABLE
            return (
                isinstance(expr, ast.Attribute)
                and isinstance(expr.value, ast.Name)
                and expr.value.id in modules
                and variables.get(expr.attr) == TABLE
            )

        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            scope = _scope(node, parents)
            function = getattr(scope, "name", "")
            if name in ROWS_FUNCTIONS and len(node.args) >= 3 and is_parcels(node.args[1]):
                kind, columns = "insert", _row_keys(node.args[2], scope)
                value_sources, keywords = [node.args[2]], []
            elif name in ("insert", "update") and (
                (node.args and is_parcels(node.args[0]))
                or (isinstance(func, ast.Attribute) and is_parcels(func.value))
            ):
                kind, columns = str(name), _statement_columns(node, str(name), parents)
                value_sources, keywords = [], []
                for link in _chain(node, parents):
                    assert isinstance(link.func, ast.Attribute)
                    if link.func.attr == "values":
                        value_sources.extend(link.args)
                        keywords.extend(link.keywords)
                executing = parents.get(node)
                if not value_sources and isinstance(executing, ast.Call) and executing.args:
                    value_sources = executing.args[1:2]  # conn.execute(insert, rows)
            else:
                continue
            assert columns is not None, f"{path}:{node.lineno}: columns not literal"
            if not {"Status", "UpdatedAt"} & columns:
                continue
            found.append(
                StatusWrite(
                    where=f"{path.relative_to(REPO)}:{node.lineno}",
                    function=function,
                    kind=kind,
                    columns=frozenset(columns),
                    sources=_sources(node, parents, namespace) if kind == "update" else None,
                    target=_target(value_sources, keywords, scope, namespace)
                    if "Status" in columns
                    else None,
                )
            )
    return found


def _path(write: StatusWrite) -> str:
    return write.where.rsplit(":", 1)[0]


def violations(
    side: str, writes: list[StatusWrite]
) -> tuple[list[str], set[tuple[str | None, str]]]:
    """What `side`'s statements do against the split, and the edges they make."""
    edges = dispatcher_edges() if side == DISPATCHER_SIDE else execution_edges()
    wrong: list[str] = []
    made: set[tuple[str | None, str]] = set()
    for write in writes:
        if "Status" not in write.columns:  # the lease: the dispatcher's, on a Reserved parcel
            if not (side == DISPATCHER_SIDE and write.sources == {RESERVED}):
                wrong.append(f"{write.where}: writes UpdatedAt without a transition")
            continue
        if "UpdatedAt" not in write.columns and write.kind == "update":
            wrong.append(f"{write.where}: moves a parcel without stamping UpdatedAt")
        checked = (_path(write), write.function) in RUNTIME_CHECKED
        if side == EXECUTION_SIDE and checked:
            continue
        if write.kind == "insert":
            moves = {(None, write.target)} if write.target else None
        elif write.sources and write.target:
            moves = {(source, write.target) for source in write.sources}
        else:
            moves = None
        if moves is None:
            wrong.append(f"{write.where}: its move cannot be read from the source")
            continue
        made |= moves
        wrong.extend(
            f"{write.where}: {source or '(creation)'} -> {target} is not {side}'s move"
            for source, target in sorted(moves, key=str)
            if (source, target) not in edges
        )
    return wrong, made


def test_these_are_the_columns_the_ownership_test_splits_by_transition() -> None:
    assert set(TRANSITION_COLUMNS) == {(TABLE, "Status"), (TABLE, "UpdatedAt")}


def test_the_machine_splits_the_moves_between_the_sides() -> None:
    shared = [
        f"{e.source} -> {e.target}"
        for e in PARCEL.edges
        if Actor.DISPATCHER in e.actors and len(e.actors) > 1
    ]
    assert not shared, f"moves both sides would take: {shared}"
    assert dispatcher_edges() and execution_edges()
    assert all(Actor.CORE in e.actors for e in PARCEL.edges if Actor.DISPATCHER not in e.actors)


@pytest.mark.parametrize("side", [DISPATCHER_SIDE, EXECUTION_SIDE])
def test_each_side_makes_only_its_own_moves(side: str) -> None:
    writes = status_writes(side)
    assert writes, f"{side} writes no Parcels.Status: the scan has lost it"
    wrong, made = violations(side, writes)
    assert not wrong, "\n".join(wrong)
    if side == DISPATCHER_SIDE:
        assert made == dispatcher_edges(), f"the dispatcher's moves it never makes: {made}"


def test_the_runtime_checked_movers_exist() -> None:
    present = {
        (_path(w), w.function)
        for side in (DISPATCHER_SIDE, EXECUTION_SIDE)
        for w in status_writes(side)
    }
    assert present >= RUNTIME_CHECKED, RUNTIME_CHECKED - present


def test_each_rule_catches_a_violation() -> None:
    """A move of the other side's, a move the source does not spell, an unstamped move, an
    UpdatedAt written on its own outside the lease: each fails; the lease does not."""

    def write(line: int, sources: Any, target: Any, *columns: str) -> StatusWrite:
        return StatusWrite(f"m.py:{line}", "f", "update", frozenset(columns), sources, target)

    both = ("Status", "UpdatedAt")
    wrong, _ = violations(
        EXECUTION_SIDE,
        [
            write(1, frozenset({"Unassigned"}), "Reserved", *both),  # the dispatcher's
            write(2, None, "Done", *both),  # from a state the source does not spell
            write(3, frozenset({"Completing"}), "Done", "Status"),  # not stamped
            write(4, frozenset({"Reserved"}), None, "UpdatedAt"),  # execution has no lease
            write(5, frozenset({"Completing"}), "Failed", *both),  # fine
        ],
    )
    assert wrong == [
        "m.py:1: Unassigned -> Reserved is not dxts.execution's move",
        "m.py:2: its move cannot be read from the source",
        "m.py:3: moves a parcel without stamping UpdatedAt",
        "m.py:4: writes UpdatedAt without a transition",
    ]
    wrong, _ = violations(
        DISPATCHER_SIDE,
        [
            write(1, frozenset({"Reserved"}), None, "UpdatedAt"),  # the lease
            write(2, frozenset({"Assigned"}), "Completing", *both),  # execution's
        ],
    )
    assert wrong == ["m.py:2: Assigned -> Completing is not dxts.dispatcher's move"]


def test_the_scan_reads_a_move_from_the_source(tmp_path: Path) -> None:
    namespace = {"P": ParcelStatus, "RESERVED": "Reserved"}
    tree = ast.parse(
        "sa.update(parcels).where(parcels.c.ID == 1, parcels.c.Status == RESERVED)"
        ".values(Status=P.ASSIGNED)\n"
        "sa.update(parcels).where(parcels.c.Status.in_([P.DONE, 'Failed']))\n"
        "sa.update(parcels).where(parcels.c.Status == source)\n"
    )
    parents = _parents(tree)
    calls = sorted(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "update"
        ),
        key=lambda n: n.lineno,
    )
    assert [_sources(c, parents, namespace) for c in calls] == [
        {"Reserved"},
        {"Done", "Failed"},
        None,
    ]
    (values,) = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "values"
    ]
    assert _target([], values.keywords, tree, namespace) == "Assigned"


class NoStatements:
    """A connection that fails on any statement: nothing may be written."""

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a statement was run")


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (ParcelStatus.UNASSIGNED, ParcelStatus.RESERVED),
        (ParcelStatus.RESERVED, ParcelStatus.ASSIGNED),
        (ParcelStatus.RESERVED, ParcelStatus.UNASSIGNED),
    ],
)
async def test_executions_mover_refuses_the_dispatchers_moves(
    source: ParcelStatus, target: ParcelStatus
) -> None:
    """The runtime check of `move_parcels`: each of the dispatcher's moves is refused before
    any statement runs, alongside a move of execution's own."""
    rows = [
        ParcelRow(new_id(), None, "Compute", status.value, None, {})
        for status in (ParcelStatus.ASSIGNED, source)
    ]
    moves = [ParcelMove(rows[0], ParcelStatus.COMPLETING.value), ParcelMove(rows[1], target.value)]
    with pytest.raises(InvalidTransition):
        await move_parcels(NoStatements(), moves, datetime.now(UTC))  # type: ignore[arg-type]
