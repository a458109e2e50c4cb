"""The limits a submitted file must keep to, checked before anything builds it.

A YAML document is a recipe, not a size: a kilobyte of anchors and aliases ("billion laughs")
expands into a billion nodes once anything walks it, and a few hundred kilobytes of `[[[…]]]`
take every recursive walker (the composer, cwl-utils, hashing) past Python's recursion limit.
So a file is checked from its event stream alone, before composition: libyaml's parser (C, no
tree built) reports each node, anchor and alias, and `check_text` counts the nodes as they would
be once expanded (an alias adds the size of the node it names), the aliases and the nesting
depth, and stops at the first limit crossed. A billion-laughs file is refused after a hundred or
so events, in milliseconds, with nothing allocated.

The limits are the installation file's `document_limits` (`dxts.core.config.DocumentLimits`),
shared by the definition service and the `dxts` CLI, which both load documents through
`dxts.cwl.loading`.
"""

from __future__ import annotations

import io

import yaml

from dxts.core.config import DocumentLimits
from dxts.core.deadlines import checkpoint

# The C parser when PyYAML has libyaml (its wheels do), else the same parser in Python.
_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# How many events pass between two looks at the deadline.
_EVENTS_PER_CHECKPOINT = 4096
_OPENING = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSING = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
_NODES = (yaml.ScalarEvent, *_OPENING)


class AbandonableText(io.StringIO):
    """A text for a YAML loader that reads it in chunks (ruamel reads 4 KiB at a time): each
    read is a `checkpoint`, so even one long parse stops soon after the deadline."""

    def __init__(self, text: str, path: str) -> None:
        super().__init__(text)
        self.name = path
        self._doing = f"parsing {path}"

    def read(self, size: int | None = -1, /) -> str:
        checkpoint(self._doing)
        return super().read(size)


class DocumentRefused(ValueError):
    """A file of the bundle that is not parsed: `limit` names the limit it crosses (the field of
    DocumentLimits), empty when the file is simply not YAML (a recursive alias, say)."""

    def __init__(self, path: str, message: str, limit: str = "") -> None:
        self.path = path
        self.limit = limit
        super().__init__(f"{path}: {message}")


def _over(path: str, limit: str, value: int, what: str) -> DocumentRefused:
    return DocumentRefused(path, f"{what} than the limit document_limits.{limit} = {value}", limit)


def check_size(
    path: str, size: int, limits: DocumentLimits, limit: str = "max_document_bytes"
) -> None:
    """Refuse a file of `size` bytes bigger than one file may be (`limit`: a document's, or a
    data file's, `max_data_bytes`)."""
    value = getattr(limits, limit)
    if size > value:
        raise _over(path, limit, value, f"{size} bytes, more")


def check_text(path: str, text: str, limits: DocumentLimits) -> int:
    """Refuse `text` (the file `path`) if it crosses a limit, before anything composes it;
    else return its number of nodes, aliases expanded.

    Raises DocumentRefused, also for a text that is not YAML at all (libyaml's message): a
    file the check cannot read through is never handed to a loader.
    """
    # Every character is at least one byte: a text too long in characters is not encoded.
    too_long = len(text) > limits.max_document_bytes
    check_size(path, len(text) if too_long else len(text.encode(errors="surrogatepass")), limits)
    depth = nodes = aliases = 0
    # An anchor may be defined again; an alias names its latest definition, which may still be
    # open (the alias is inside the node it names: a cycle no walk of it ends).
    size_of: dict[str, int] = {}  # anchor → nodes of its latest definition, expanded
    latest: dict[str, int] = {}  # anchor → the event number of its latest definition
    still_open: set[str] = set()  # anchors whose latest definition is an open collection
    opened: list[tuple[str | None, int, int]] = []  # per open collection: anchor, event, nodes
    try:
        for count, event in enumerate(yaml.parse(text, Loader=_Parser), 1):
            if count % _EVENTS_PER_CHECKPOINT == 0:
                checkpoint(f"parsing {path}")
            if isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > limits.max_aliases:
                    raise _over(path, "max_aliases", limits.max_aliases, "more aliases")
                if event.anchor in still_open:
                    raise DocumentRefused(
                        path, f"the alias *{event.anchor} names a node that contains it"
                    )
                nodes += size_of.get(event.anchor or "", 1)
            elif isinstance(event, _NODES):
                nodes += 1
                anchor = event.anchor
                if anchor is not None:
                    latest[anchor] = count
                if isinstance(event, _OPENING):
                    depth += 1
                    if depth > limits.max_depth:
                        raise _over(path, "max_depth", limits.max_depth, "nested deeper")
                    opened.append((anchor, count, nodes - 1))
                    if anchor is not None:
                        still_open.add(anchor)
                elif anchor is not None:
                    size_of[anchor] = 1
                    still_open.discard(anchor)
            elif isinstance(event, _CLOSING):
                depth -= 1
                anchor, defined, before = opened.pop()
                if anchor is not None and latest[anchor] == defined:
                    size_of[anchor] = nodes - before
                    still_open.discard(anchor)
            if nodes > limits.max_nodes:
                raise _over(path, "max_nodes", limits.max_nodes, "more nodes (aliases expanded)")
    except yaml.YAMLError as error:
        if "maximum nesting depth" in str(error):  # libyaml's own bound (1000)
            raise _over(path, "max_depth", limits.max_depth, "nested deeper") from None
        raise DocumentRefused(path, yaml_problem(error)) from None
    return nodes


def yaml_problem(error: Exception) -> str:
    """A YAML syntax error in one line that still says where: "line 4, column 9: not YAML or
    JSON: mapping values are not allowed here" (the parsers' own text spans several lines)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or getattr(error, "context", None)
    if mark is not None:
        return (
            f"line {mark.line + 1}, column {mark.column + 1}: not YAML or JSON: "
            f"{problem or 'syntax error'}"
        )
    return f"not YAML or JSON: {' '.join(str(error).split())}"
