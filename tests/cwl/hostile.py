"""Hostile documents, one per limit, shared by the tests of dxts.cwl, the definition service and
the CLI: each crosses exactly one of the default `DocumentLimits` and names it when refused."""

from __future__ import annotations

from dxts.core.config import DocumentLimits

LIMITS = DocumentLimits()
HEADER = "cwlVersion: v1.2\nclass: Workflow\n"


def billion_laughs(levels: int = 10) -> str:
    """Ten levels of nine aliases each: ~1 KB that stands for 9^10 (3.5 billion) strings."""
    lines = [HEADER, "x:\n", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n']
    previous = "a"
    for level in range(1, levels):
        name = f"l{level}"
        lines.append(f"  {name}: &{name} [{','.join([f'*{previous}'] * 9)}]\n")
        previous = name
    return "".join(lines)


def nested(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def aliased(count: int = LIMITS.max_aliases + 1) -> str:
    """Many aliases of a one-node anchor: few nodes, too many aliases."""
    return HEADER + "x: &x 1\ny: [" + ",".join(["*x"] * count) + "]\n"


def many_nodes(count: int = LIMITS.max_nodes + 1) -> str:
    """Flat, no alias: only the node count is over (the text stays under the size limit)."""
    return HEADER + "x: [" + ",".join(["1"] * count) + "]\n"


def oversized(size: int = LIMITS.max_document_bytes + 1) -> str:
    return HEADER + "doc: " + "x" * (size - len(HEADER) - 5)


# Each hostile main document and the limit (a DocumentLimits field) its refusal names.
BY_LIMIT = {
    "max_nodes": billion_laughs(),
    "max_depth": nested(),
    "max_aliases": aliased(),
    "max_document_bytes": oversized(),
}
