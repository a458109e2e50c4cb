"""Every named lock dxts takes is declared in one table (`LockKind`), and its name on the wire
never changes: replicas of two releases must compute the same names during a rolling upgrade."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from dxts.core.locks import Lock, LockKind

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
    "package-dir"
]
# The names servers hold today: a row changes only by adding one.
ON_THE_WIRE = {
    "COMMAND": "command",
    "REQUEST": "request",
    "LIFECYCLE": "lifecycle",
    "FEEDER": "feeder",
    "PACKER": "packer",
    "FAILED_INPUTS": "failed-inputs",
    "COUNTER_FOLD": "counter-fold",
    "COUNTER_REPAIR": "counter-repair",
    "DISPATCH_POLL": "dispatch-poll",
    "DISPATCH_CANCEL": "dispatch-cancel",
}
TRANSFORMATION = bytes.fromhex("0190f1e2a3b47c5d8e9fa0b1c2d3e4f5")


def test_every_lock_kind_keeps_its_name_on_the_wire() -> None:
    assert {kind.name: kind.value for kind in LockKind} == ON_THE_WIRE
    assert (
        Lock(LockKind.FEEDER, TRANSFORMATION).name
        == Lock("feeder", TRANSFORMATION).name
        == "dxts:feeder:0190f1e2-a3b4-7c5d-8e9f-a0b1c2d3e4f5"
    )


def handwritten_kinds(source: str) -> list[int]:
    """The lines of `source` that build a Lock from a literal kind rather than a LockKind."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Lock"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]


def test_the_scan_finds_a_handwritten_lock_kind() -> None:
    assert handwritten_kinds('held = Lock("feeder", tid)\nother = Lock(LockKind.PACKER, t)') == [1]


def test_no_module_names_a_lock_kind_by_hand() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for directory in sorted(set(PACKAGE_DIRS.values()))
        for path in sorted((REPO / directory).rglob("*.py"))
        for line in handwritten_kinds(path.read_text())
    ]
    assert not found, f"declare the lock's kind in dxts.core.locks.LockKind: {found}"
