"""The web component's parts that need no service: the graph layout, the plots, failure
grouping, sign-in tickets, the redirect guard, and why a workgraph has not finished."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from types import SimpleNamespace

import pytest

from dxts.core.errors import DxtsError
from dxts.v1 import definition_pb2
from dxts.web import steering
from dxts.web.app import _local
from dxts.web.graph import Node, layout
from dxts.web.plots import cumulative, histogram
from dxts.web.sessions import Sessions
from dxts.web.workgraphs import Member, not_finishing


def test_members_are_layered_by_dataflow_and_joined_by_their_feeder_edges() -> None:
    nodes = [
        Node("m", "Merge", ["r"]),
        Node("s", "Simulation", []),
        Node("r", "Reconstruction", ["s"]),
        Node("d", "Replication", ["m"]),
    ]
    drawing = layout(nodes)
    layers = {n.label: n.layer for n in drawing.nodes}
    assert layers == {"Simulation": 0, "Reconstruction": 1, "Merge": 2, "Replication": 3}
    assert {(e.source.label, e.target.label) for e in drawing.edges} == {
        ("Simulation", "Reconstruction"),
        ("Reconstruction", "Merge"),
        ("Merge", "Replication"),
    }
    xs = [n.x for n in sorted(drawing.nodes, key=lambda n: n.layer)]
    assert xs == sorted(xs) and len(set(xs)) == 4
    assert all(n.x + drawing.node_width <= drawing.width for n in drawing.nodes)


def test_a_cycle_or_an_unknown_feeder_does_not_break_the_layout() -> None:
    drawing = layout([Node("a", "A", ["b"]), Node("b", "B", ["a", "elsewhere"])])
    assert len(drawing.nodes) == 2
    assert len(drawing.edges) == 2


def test_members_of_one_layer_do_not_overlap() -> None:
    nodes = [Node("s", "S", [])] + [Node(f"c{i}", f"C{i}", ["s"]) for i in range(50)]
    drawing = layout(nodes)
    column = sorted(n.y for n in drawing.nodes if n.layer == 1)
    assert len(column) == 50
    assert all(b - a >= drawing.node_height for a, b in pairwise(column))


def test_progress_is_drawn_as_cumulative_counts() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    plot = cumulative(
        {"processed": [start + timedelta(seconds=s) for s in (1, 2, 3)], "failed": [start]},
        start + timedelta(seconds=10),
    )
    assert plot is not None
    assert [(s.name, s.last) for s in plot.series] == [("processed", 3), ("failed", 1)]
    assert cumulative({"processed": [], "failed": []}, start) is None


def test_a_histogram_counts_every_value_once() -> None:
    drawn = histogram("CPU", "s", [1.0, 2.0, 2.0, 3.0, 10.0], bins=4)
    assert drawn is not None
    assert sum(b.count for b in drawn.bars) == 5
    assert drawn.bars[0].count == 4 and drawn.bars[-1].count == 1
    assert histogram("CPU", "s", []) is None


def test_a_histogram_bins_by_the_spread_with_a_count_axis_and_failures_apart() -> None:
    """A 0.2 MB spread around 100 MB is binned in tenths, not stretched over 24 bins of
    nothing; the count axis reads 0 to the tallest bin; failed parcels are bars of their own."""
    drawn = histogram(
        "Peak memory", "MB", {"succeeded": [100.0, 100.1, 100.15, 100.2], "failed": [100.05]}
    )
    assert drawn is not None and drawn.count == 5 and drawn.failed == 1
    assert len({(b.low, b.high) for b in drawn.bars}) <= 3
    assert drawn.y_ticks[0][1] == "0"
    assert drawn.y_ticks[-1][1] == str(
        max(sum(b.count for b in drawn.bars if b.low == low) for low in {b.low for b in drawn.bars})
    )
    assert {b.kind for b in drawn.bars} == {"succeeded", "failed"}
    assert sum(b.count for b in drawn.bars if b.kind == "failed") == 1
    assert drawn.x_ticks[0][1] == "100.0"
    drawn_width = max(b.x + b.width for b in drawn.bars) - min(b.x for b in drawn.bars)
    assert drawn_width < drawn.width / 2  # a narrow spread is drawn narrow


def test_progress_spans_the_members_run_not_up_to_now() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    events = {"processed": [start + timedelta(seconds=s) for s in (10, 20)], "failed": []}
    finished = cumulative(
        events, start + timedelta(days=1), start=start, end=start + timedelta(seconds=20)
    )
    assert finished is not None
    assert [label for _, label in finished.x_labels] == ["00:00:00", "00:00:20"]


def test_a_sign_in_ticket_works_once() -> None:
    sessions = Sessions(session_seconds=60, ticket_seconds=60)
    ticket = sessions.issue_ticket("token")
    assert sessions.redeem(ticket) == "token"
    assert sessions.redeem(ticket) is None
    assert sessions.redeem("made-up") is None
    late = sessions.issue_ticket("token", seconds=-1)
    assert sessions.redeem(late) is None


def test_a_session_is_found_by_its_id_until_closed() -> None:
    sessions = Sessions(session_seconds=60, ticket_seconds=60)
    session = sessions.open("token")
    assert sessions.find(session.id) is session
    assert session.csrf_matches(session.csrf) and not session.csrf_matches("guess")
    sessions.close(session.id)
    assert sessions.find(session.id) is None


def test_redirects_stay_on_this_site() -> None:
    assert _local("/workgraphs/x?y=1") == "/workgraphs/x?y=1"
    for elsewhere in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)", ""):
        assert _local(elsewhere) == "/"


def test_why_it_has_not_finished_is_the_drain_guards_reasons_member_by_member() -> None:
    def member(step: str, *reasons: definition_pb2.DrainReason) -> Member:
        t = definition_pb2.Transformation(transformation_id=step.lower(), step=step)
        return Member(t, "Active", {}, {}, holding=list(reasons))

    held = [
        member(
            "Sim",
            definition_pb2.DrainReason(
                kind="inputs", state="Problematic", count=2, message="2 Problematic inputs"
            ),
        ),
        member(
            "Reco",
            definition_pb2.DrainReason(kind="status", state="Paused", message="it is Paused"),
        ),
        member("Merge"),
    ]
    reasons = not_finishing("Active", definition_pb2.Workgraph(), held)
    assert reasons == [
        "Sim: 2 Problematic inputs (reset or write them off)",
        "Reco: it is Paused (resume it)",
    ]
    assert not_finishing("Completed", definition_pb2.Workgraph(), held) == []


async def test_a_flush_whose_packer_failed_is_refused_in_the_packers_words() -> None:
    """The flush ran, but its packer failed: the page says so (as a refusal) in its words."""

    async def flush(request: definition_pb2.FlushTransformationRequest) -> object:
        return definition_pb2.FlushTransformationResponse(
            inputs_offered=2, failure="packer raised OSError: full", failure_class="PluginFailed"
        )

    clients = SimpleNamespace(definition=SimpleNamespace(FlushTransformation=flush))
    verbs = steering.MEMBER_VERBS
    with pytest.raises(DxtsError, match=r"its packer failed \(PluginFailed\): packer raised"):
        await steering.steer(clients, verbs, "flush", "01", "")  # type: ignore[arg-type]
