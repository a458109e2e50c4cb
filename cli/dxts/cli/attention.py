"""Attention as the commands print it: the marker a table's row carries, the status of an ended
workgraph that did not end cleanly, and an item in words with the command to type.

The items are computed by the definition service (`Workgraph.attention`,
`Transformation.attention`); nothing here judges, it only words.
"""

from __future__ import annotations

from collections.abc import Sequence

from dxts.v1 import definition_pb2

MARK = "!"
# The kind of item a failed lifecycle check raises. `watch` ends on it as "blocked" once the
# lifecycle has moved the owner to its Blocked state (the result is recorded a moment before).
ACTION_FAILED = "action-failed"


def marker(items: Sequence[definition_pb2.Attention]) -> str:
    """A row's attention cell: "" when none, else "!" and the first item's kind (and how many
    more), e.g. "! failure-rate +1"."""
    if not items:
        return ""
    more = f" +{len(items) - 1}" if len(items) > 1 else ""
    return f"{MARK} {items[0].kind}{more}"


def status_text(status: str, workgraph: definition_pb2.Workgraph) -> str:
    """The status, with how an ended workgraph ended when not cleanly ("Completed with 2
    written off"), and "(halted)"."""
    text = status
    if workgraph.ended_with:
        text += f" with {workgraph.ended_with}"
    return text + (" (halted)" if workgraph.halted else "")


def line(item: definition_pb2.Attention) -> str:
    """One item in words: where, what, since when, what to do and the command."""
    where = f"{item.step}: " if item.step else ""
    since = ""
    if item.HasField("since"):
        since = f" (since {item.since.ToDatetime():%Y-%m-%d %H:%M} UTC)"
    return f"{where}{item.what}{since}; {item.todo}: {item.command}"


def beyond_checks(items: Sequence[definition_pb2.Attention]) -> list[definition_pb2.Attention]:
    """The items other than failed checks (`watch` ends on those as "blocked")."""
    return [i for i in items if i.kind != ACTION_FAILED]
