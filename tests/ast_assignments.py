"""What the static scans of the source (ownership, parcel transitions) share: the values a name
is assigned in a scope, so that a statement built from a variable is followed to what it holds."""

from __future__ import annotations

import ast


def values_assigned(scope: ast.AST, name: str) -> list[ast.expr]:
    """Every value `name` is assigned (plainly or with an annotation) anywhere in `scope`."""
    return [
        node.value
        for node in ast.walk(scope)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and node.value is not None
        and any(
            isinstance(t, ast.Name) and t.id == name
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
