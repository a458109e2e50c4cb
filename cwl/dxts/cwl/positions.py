"""Where a problem is in the document as written: the line and column of its path.

A problem names a dotted path (`steps.merge.hints.dirac:Transformation.packer.args`); a person
fixing the document in an editor wants the line. The main document's text is composed once
(YAML nodes keep their marks; JSON is YAML) and each path walked down it: a mapping by key, a
list by `[n]` or — CWL's list forms of `steps`, `inputs` and `outputs` — by the item whose `id`
is the name. The position is the key's (or the item's) where the walk ends; a path that goes
further than the text (a default the document does not write) stops at the deepest part found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import yaml

from dxts.cwl.bundle import Bundle
from dxts.cwl.problems import Problem

Position = tuple[int, int]
_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def _named(item: yaml.Node, name: str) -> bool:
    if not isinstance(item, yaml.MappingNode):
        return False
    for key, value in item.value:
        if key.value == "id" and isinstance(value, yaml.ScalarNode):
            written = str(value.value)
            return written == name or written.lstrip("#").rsplit("/", 1)[-1] == name
    return False


def _step(node: yaml.Node, part: str, index: str) -> tuple[yaml.Node, yaml.Node] | None:
    """(the node the part names, the node whose mark is its position) or None."""
    if isinstance(node, yaml.SequenceNode):
        if index:
            position = int(index)
            if position < len(node.value):
                return node.value[position], node.value[position]
            return None
        for item in node.value:
            if _named(item, part):
                return item, item
        return None
    if isinstance(node, yaml.MappingNode) and not index:
        for key, value in node.value:
            if key.value == part:
                return value, key
    return None


def locate(root: yaml.Node, path: str) -> Position | None:
    """1-based (line, column) of `path` in the composed document, as deep as it is written."""
    node, marked = root, None
    for index, name in _PART.findall(path):
        found = _step(node, name, index)
        if found is None:
            break
        node, marked = found
    if marked is None:
        return None
    return marked.start_mark.line + 1, marked.start_mark.column + 1


def located(problems: Sequence[Problem], bundle: Bundle) -> list[Problem]:
    """The problems with the position of each path in the main document, where it is written
    (a document that cannot be read as YAML leaves them as they are)."""
    if not problems:
        return list(problems)
    try:
        text = bundle.read(bundle.main)
        root = yaml.compose(text, Loader=yaml.SafeLoader) if text else None
    except (yaml.YAMLError, ValueError, OSError):
        root = None
    if root is None:
        return list(problems)
    return [
        replace(problem, position=locate(root, problem.path)) if problem.path else problem
        for problem in problems
    ]
