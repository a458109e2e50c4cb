"""The tables of `dxts list` and `dxts show`, laid out to fit the terminal.

At 80 columns a row is the handle (never cut), the title cut with an ellipsis, the status, the
progress (settled inputs over all inputs, `done/total`), the attention marker and the labels
(`campaign=2026`); the wide columns (type, owner, last update) appear only on a terminal at
least WIDE columns wide, and the full ids are in `--output json`. Nothing wraps: a cell too long
for its column ends in an ellipsis, so one row stays one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.cells import cell_len, set_cell_size

from dxts.cli.attention import MARK, marker, status_text
from dxts.cli.output import compact, name, when
from dxts.core.states import Kind

# A terminal this wide gets the wide columns (and still leaves the title room).
WIDE = 140
# Inputs that have ended (the input machine's terminal states): progress is these over all.
SETTLED_INPUTS = ("Processed", "Split", "NotProcessed")
ELLIPSIS = "…"
# The most of a workgraph's status the list keeps whole at any width.
STATUS_CHARS = 32


def annotations_of(message: Any) -> dict[str, Any]:
    try:
        found = json.loads(message.annotations_json or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def title(annotations: Mapping[str, Any]) -> str:
    """What a workgraph calls itself: the document's label, else its id."""
    return str(annotations.get("label") or annotations.get("id") or "")


def labels_text(annotations: Mapping[str, Any]) -> str:
    """The labels as typed with --label: "campaign=2026 site=cern"."""
    labels = annotations.get("labels")
    if not isinstance(labels, dict):
        return ""
    return " ".join(f"{k}={v}" for k, v in labels.items())


def progress(inputs: Iterable[Mapping[str, int]]) -> str:
    """Settled inputs over all inputs, summed over members: "12/40"; "-" with no input yet."""
    counted = list(inputs)
    total = sum(sum(m.values()) for m in counted)
    if not total:
        return "-"
    return f"{sum(m.get(s, 0) for m in counted for s in SETTLED_INPUTS)}/{total}"


# Between two columns: a space of padding each side and the (blank) divider.
GAP = 3
# The narrowest a flexible column is cut to when the width runs out (an ellipsis and 3 cells).
FLOOR = 4


@dataclass(frozen=True)
class Column:
    header: str
    # 0: never cut (as wide as its widest cell); else its share of the width left over.
    flex: int = 0
    justify: Literal["left", "right"] = "left"
    # A flexible column's width when it is cut: never less than this.
    least: int = 0


def fitted(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> str:
    """`rows` under their headers and a rule, fitting `width`: the fixed columns as wide as their
    widest cell, the flexible ones sharing what is left by their `flex` (each no wider than it
    needs, what it does not use going to the others), every cell on one line, cut with an
    ellipsis. Widths are terminal cells (a wide character counts two). Plain text: printing it
    needs no more of rich than its cell widths, which keeps `dxts list` quick to start."""
    natural = [
        max([cell_len(c.header)] + [cell_len(row[i]) for row in rows])
        for i, c in enumerate(columns)
    ]
    left = width - GAP * (len(columns) - 1)
    left -= sum(n for n, c in zip(natural, columns, strict=True) if not c.flex)
    allotted = list(natural)
    flexible = sorted((i for i, c in enumerate(columns) if c.flex), key=lambda i: natural[i])
    for position, i in enumerate(flexible):
        weights = sum(columns[j].flex for j in flexible[position:])
        share = max(
            left * columns[i].flex // weights, cell_len(columns[i].header), columns[i].least, 1
        )
        allotted[i] = min(natural[i], share)
        left -= allotted[i]
    # The floors above (headers, `least`) may overrun the width: take it back from the
    # flexible columns with the most room above their own floor, one cell at a time.
    floors = {i: columns[i].least or FLOOR for i in flexible}
    while left < 0 and flexible:
        widest = max(flexible, key=lambda j: allotted[j] - floors[j])
        if allotted[widest] <= floors[widest]:
            break
        allotted[widest] -= 1
        left += 1

    def line(cells: Sequence[str]) -> str:
        shown = (
            _cell(text, allotted[i], right=columns[i].justify == "right")
            for i, text in enumerate(cells)
        )
        return (" " * GAP).join(shown).rstrip()

    rule = "─" * (sum(allotted) + GAP * (len(columns) - 1))
    return "\n".join([line([c.header for c in columns]), rule, *(line(row) for row in rows)])


def _cell(text: str, width: int, *, right: bool) -> str:
    if cell_len(text) > width:
        text = set_cell_size(text, width - 1) + ELLIPSIS
    padding = " " * (width - cell_len(text))
    return padding + text if right else text + padding


def _attention(items: Sequence[Any], *, wide: bool) -> str:
    """The attention cell: the marker alone at 80 columns, with the first item's kind (and how
    many more) on a wide terminal; `dxts show` and `why` say the items in words."""
    if not items:
        return ""
    return marker(items) if wide else MARK


def workgraph_table(
    workgraphs: Iterable[Any],
    statuses: Mapping[str, str],
    inputs: Mapping[str, Mapping[str, int]],
    *,
    width: int,
) -> str:
    """`dxts list`: one row per workgraph. `statuses` by workgraph id ("Active"), `inputs`
    each member's input counts by status."""
    wide = width >= WIDE
    shown = list(workgraphs)
    # A status is shown whole ("Completed with 2 written off" is how a run that was not clean
    # tells itself from a clean one), up to STATUS_CHARS.
    texts = {w.workgraph_id: status_text(statuses[w.workgraph_id], w) for w in shown}
    states = min(max((cell_len(t) for t in texts.values()), default=0), STATUS_CHARS)
    columns = [
        Column("workgraph"),
        Column("title", flex=1),
        Column("status", flex=1, least=states),
        Column("progress", justify="right"),
        Column(MARK),
        Column("labels", flex=1),
    ]
    if wide:
        columns += [Column("type"), Column("owner"), Column("updated")]
    rows = []
    for w in shown:
        annotations = annotations_of(w)
        cells = [
            w.handle or w.workgraph_id,
            title(annotations),
            texts[w.workgraph_id],
            progress(inputs.get(t, {}) for t in w.transformation_ids),
            _attention(w.attention, wide=wide),
            labels_text(annotations),
        ]
        if wide:
            cells += [w.type, f"{w.owner_sub}@{w.vo}", when(w.updated_at)]
        rows.append(cells)
    return fitted(columns, rows, width)


def member_table(members: Iterable[Any], *, width: int, actions: Any) -> str:
    """`dxts show`: one row per member (a MemberView): its handle, status, progress, attention,
    feeder and parcels; wide, its kind, inputs by status and what blocks it."""
    wide = width >= WIDE
    columns = [
        Column("member"),
        Column("status"),
        Column("progress", justify="right"),
        Column(MARK),
        Column("feeder", flex=1),
        Column("parcels", flex=2),
    ]
    if wide:
        columns += [Column("kind"), Column("inputs", flex=2), Column("blocked by", flex=2)]
    rows = []
    for m in members:
        t = m.transformation
        cells = [
            t.handle or t.step,
            m.status,
            progress([m.inputs]),
            _attention(t.attention, wide=wide) or (MARK if m.blocked else ""),
            f"{'on' if t.feeder_enabled else 'off'} {t.feeder or '-'}",
            compact(m.parcels),
        ]
        if wide:
            cells += [name(Kind, t.kind), compact(m.inputs), actions(m)]
        rows.append(cells)
    return fitted(columns, rows, width)
