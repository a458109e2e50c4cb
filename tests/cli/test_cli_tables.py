"""Tables that fit (issue 32): `dxts list` and `dxts show` rendered at 80 columns stay one line
a row, with the handle whole, the title cut with an ellipsis, the status, the progress
`done/total`, the attention marker and the labels; the wide columns only on a wide terminal."""

from __future__ import annotations

import json

from dxts.cli.attention import MARK as MARKER
from dxts.cli.tables import WIDE, member_table, workgraph_table
from dxts.cli.workgraphs import MemberView
from dxts.v1 import common_pb2, definition_pb2

LONG_TITLE = "MC production of the 2026 campaign · simulate, reconstruct, merge and replicate"


def rendered(table: str, width: int) -> list[str]:
    return table.splitlines()


def workgraphs() -> list[definition_pb2.Workgraph]:
    return [
        definition_pb2.Workgraph(
            workgraph_id=f"01a23df0-40ed-73bb-bee7-e0a60b548ef{i}",
            handle=f"wg-{1040 + i}",
            type="MCSimulation",
            vo="lhcb",
            owner_sub="olivia",
            status=common_pb2.WORKGRAPH_STATUS_ACTIVE,
            annotations_json=json.dumps({"label": title, "labels": labels}),
            transformation_ids=[f"t{i}a", f"t{i}b"],
        )
        for i, (title, labels) in enumerate(
            [(LONG_TITLE, {"campaign": "2026"}), ("short", {"campaign": "2026", "site": "cern"})]
        )
    ]


INPUTS = {
    "t0a": {"Processed": 3, "NotProcessed": 1, "Assigned": 2},
    "t0b": {"Processed": 12345, "Unassigned": 50000},
    "t1a": {"Split": 4},
}


def list_lines(width: int) -> list[str]:
    found = workgraphs()
    statuses = {w.workgraph_id: "FinalizingBlocked" for w in found}
    return rendered(workgraph_table(found, statuses, INPUTS, width=width), width)


def test_the_list_fits_80_columns() -> None:
    lines = list_lines(80)
    assert len(lines) == 4  # header, rule, one line per workgraph: nothing wrapped
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].split() == ["workgraph", "title", "status", "progress", MARKER, "labels"]
    first, second = lines[2], lines[3]
    assert first.startswith("wg-1040 ") and second.startswith("wg-1041 ")
    assert "MC production…" in first and LONG_TITLE not in first
    assert "FinalizingBlocked" in first and "12349/62351" in first  # settled/all inputs
    assert "campaign=2026" in first
    assert "4/4" in second and "campaign=202…" in second  # labels cut last


def test_the_wide_columns_only_on_a_wide_terminal() -> None:
    assert "MCSimulation" not in "\n".join(list_lines(80))
    wide = list_lines(WIDE)
    assert all(len(line) <= WIDE for line in wide)
    assert "MCSimulation" in wide[2] and "olivia@lhcb" in wide[2]
    assert "MC production of the" in wide[2]  # the title gets more room


def test_the_attention_marker_and_how_it_ended_fit_at_80_columns() -> None:
    """A workgraph needing attention carries its marker and first item's kind in the row, one
    that does not an empty cell; an ended one that wrote inputs off says so in its status."""
    found = workgraphs()
    found[0].attention.add(kind="failure-rate")
    found[1].ended_with = "2 written off"
    statuses = {w.workgraph_id: "Active" for w in found}
    statuses[found[1].workgraph_id] = "Completed"
    lines = rendered(workgraph_table(found, statuses, INPUTS, width=80), 80)
    assert all(len(line) <= 80 for line in lines)
    assert f" {MARKER} " in lines[2] and MARKER not in lines[3]
    assert "Completed with 2 written off" in lines[3]
    wide = rendered(workgraph_table(found, statuses, INPUTS, width=WIDE), WIDE)
    assert f"{MARKER} failure-rate" in wide[2]


def members() -> list[MemberView]:
    views = []
    for step, status in (("Simulation", "Active"), ("DatasetReplication", "Idle")):
        t = definition_pb2.Transformation(
            transformation_id=f"01a23df0-40ed-73bb-bee7-{step[:12].lower():0>12}",
            handle=f"wg-1040/{step}",
            step=step,
            kind=common_pb2.KIND_COMPUTE,
            feeder="Seeds",
            feeder_enabled=True,
        )
        views.append(
            MemberView(
                t,
                status,
                {"Processed": 40, "Assigned": 10, "Unassigned": 50},
                {"Done": 40, "Failed": 12, "Assigned": 10, "Unassigned": 3, "Cancelled": 1},
            )
        )
    return views


def test_show_fits_80_columns() -> None:
    lines = rendered(member_table(members(), width=80, actions=lambda m: ""), 80)
    assert len(lines) == 4 and all(len(line) <= 80 for line in lines), lines
    assert lines[0].split()[:3] == ["member", "status", "progress"]
    assert lines[2].startswith("wg-1040/Simulation ") and "40/100" in lines[2]
    assert lines[3].startswith("wg-1040/DatasetReplication ")
    assert "Done 40" in lines[2] and "…" in lines[2]  # the parcel counts, cut
    wide = rendered(member_table(members(), width=WIDE, actions=lambda m: ""), WIDE)
    assert all(len(line) <= WIDE for line in wide) and "Compute" in wide[2]
