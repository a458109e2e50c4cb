"""A workgraph's members drawn as a graph: a layered layout rendered as SVG on the server.

Members are placed left to right by dataflow depth (a member's layer is one more than its
deepest feeder's), ordered within a layer by the mean position of their feeders so edges
cross little, and joined by one curve per feeder edge. A workgraph's graph is a small DAG (a
chain with fan-in/fan-out, tens of members at most), which this draws well and in
microseconds, without shipping a layout library to the browser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

NODE_WIDTH = 240
NODE_HEIGHT = 80
GAP_X = 70
GAP_Y = 18
PAD = 12


@dataclass
class Node:
    id: str
    label: str
    upstream: Sequence[str]
    status: str = ""
    kind: str = ""
    inputs: dict[str, int] = field(default_factory=dict)
    href: str = ""
    x: int = 0
    y: int = 0
    layer: int = 0

    @property
    def total(self) -> int:
        return sum(self.inputs.values())

    def fraction(self, *statuses: str) -> float:
        return sum(self.inputs.get(s, 0) for s in statuses) / self.total if self.total else 0.0


@dataclass
class Edge:
    source: Node
    target: Node

    @property
    def path(self) -> str:
        x1, y1 = self.source.x + NODE_WIDTH, self.source.y + NODE_HEIGHT // 2
        x2, y2 = self.target.x, self.target.y + NODE_HEIGHT // 2
        bend = (x2 - x1) / 2 if x2 > x1 else GAP_X
        return f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"


@dataclass
class Drawing:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int
    node_width: int = NODE_WIDTH
    node_height: int = NODE_HEIGHT


def _layers(nodes: Sequence[Node]) -> None:
    """Each node's layer: 0 without a feeder among the nodes, else one past its deepest."""
    by_id = {n.id: n for n in nodes}
    depth: dict[str, int] = {}

    def layer_of(node: Node, visiting: frozenset[str]) -> int:
        if node.id in depth:
            return depth[node.id]
        feeders = [by_id[u] for u in node.upstream if u in by_id and u not in visiting]
        found = 1 + max((layer_of(f, visiting | {node.id}) for f in feeders), default=-1)
        depth[node.id] = found
        return found

    for node in nodes:
        node.layer = layer_of(node, frozenset())


def layout(nodes: Sequence[Node]) -> Drawing:
    """Place `nodes` (their feeders named by id in `upstream`) and join them."""
    _layers(nodes)
    columns: dict[int, list[Node]] = {}
    for node in nodes:
        columns.setdefault(node.layer, []).append(node)
    rank: dict[str, float] = {}
    for number in sorted(columns):
        column = columns[number]
        if number:
            column.sort(
                key=lambda n: (
                    sum(rank[u] for u in n.upstream if u in rank)
                    / max(1, sum(1 for u in n.upstream if u in rank))
                )
            )
        for index, node in enumerate(column):
            rank[node.id] = index
    tallest = max((len(c) for c in columns.values()), default=0)
    height = 2 * PAD + tallest * NODE_HEIGHT + max(0, tallest - 1) * GAP_Y
    for number, column in columns.items():
        used = len(column) * NODE_HEIGHT + (len(column) - 1) * GAP_Y
        top = (height - used) // 2
        for index, node in enumerate(column):
            node.x = PAD + number * (NODE_WIDTH + GAP_X)
            node.y = top + index * (NODE_HEIGHT + GAP_Y)
    by_id = {n.id: n for n in nodes}
    edges = [Edge(by_id[u], n) for n in nodes for u in n.upstream if u in by_id]
    width = 2 * PAD + len(columns) * NODE_WIDTH + max(0, len(columns) - 1) * GAP_X
    return Drawing(list(nodes), edges, width, height)
