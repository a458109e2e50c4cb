"""`dxts why` says what needs attention first (the service's items), then what holds the
workgraph on purpose; the normal states (the drain guard's own reasons: a feeder still on,
work in flight) only with --all. `watch`, `list` and `show` word the same items."""

from __future__ import annotations

from dxts.cli import attention
from dxts.cli.inspect import member_reasons, workgraph_reasons
from dxts.cli.workgraphs import (
    EXIT_ATTENTION,
    EXIT_BLOCKED,
    MemberView,
    WorkgraphView,
    _ending,
    _ending_line,
)
from dxts.v1 import common_pb2, definition_pb2

TOOL_LINE = "ERROR: seed 7 is cursed"
RATE = definition_pb2.Attention(
    kind="failure-rate",
    what=f"3 of its last 9 parcels failed: {TOOL_LINE}",
    todo="fix the cause",
    command="dxts parcels tf --status Failed",
    transformation_id="tf",
    step="Sim",
)


def a_workgraph(
    member: MemberView,
    items: list[definition_pb2.Attention] = (),  # type: ignore[assignment]
    status: int = common_pb2.WORKGRAPH_STATUS_ACTIVE,
) -> WorkgraphView:
    return WorkgraphView(
        definition_pb2.Workgraph(workgraph_id="wg", status=status, attention=items), [member], []
    )


def test_a_members_reasons_are_the_drain_guards_with_the_command_that_helps() -> None:
    t = definition_pb2.Transformation(
        transformation_id="tf", step="Sim", feeder="Seeds", feeder_enabled=True
    )
    reasons = [
        definition_pb2.DrainReason(kind="status", state="Paused", message="it is Paused"),
        definition_pb2.DrainReason(kind="feeder", message="its feeder is enabled"),
        definition_pb2.DrainReason(kind="inputs", state="Problematic", count=2),
        definition_pb2.DrainReason(kind="inputs", state="Unassigned", count=3),
        definition_pb2.DrainReason(kind="parcels", state="Assigned", count=1),
    ]
    # The counts beside them disagree on purpose: the contract's reasons are what is shown.
    member = MemberView(t, "Paused", {"Problematic": 9}, {}, holding=reasons)
    view = a_workgraph(member)
    assert member_reasons(view, member) == [
        "Sim (tf) is Paused",
        "  paused: its packer makes no parcels (dxts resume tf)",
        "  parcels in flight: Assigned 1",
        "  inputs still to process: Unassigned 3",
        "  its feeder Seeds is on: more inputs may come (dxts feeder show tf; dxts drain wg "
        "stops feeding)",
    ]
    member.holding = []
    assert member_reasons(view, member) == ["Sim (tf) is Paused"]


def test_why_says_attention_first_and_normal_states_only_with_all() -> None:
    t = definition_pb2.Transformation(
        transformation_id="tf", step="Sim", feeder="Seeds", feeder_enabled=True, attention=[RATE]
    )
    held = [
        definition_pb2.DrainReason(kind="feeder", message="its feeder is enabled"),
        definition_pb2.DrainReason(kind="parcels", state="Assigned", count=1),
    ]
    view = a_workgraph(MemberView(t, "Active", {}, {}, holding=held), [RATE])
    quoted = workgraph_reasons(view, everything=False)
    assert quoted == [attention.line(RATE)]
    assert quoted[0].startswith(f"Sim: 3 of its last 9 parcels failed: {TOOL_LINE}")
    every = workgraph_reasons(view, everything=True)
    assert every[0] == quoted[0]
    assert "workgraph wg is Active" in every
    assert any("its feeder Seeds is on" in line for line in every)


def test_a_healthy_workgraph_says_nothing_needs_attention() -> None:
    t = definition_pb2.Transformation(
        transformation_id="tf", step="Sim", feeder="Seeds", feeder_enabled=True
    )
    held = [definition_pb2.DrainReason(kind="feeder", message="its feeder is enabled")]
    view = a_workgraph(MemberView(t, "Active", {}, {}, holding=held))
    assert workgraph_reasons(view, everything=False) == [
        "nothing needs attention: workgraph wg is Active (dxts why --all: what it is doing)"
    ]


def test_after_drain_an_edge_fed_member_is_not_said_to_need_a_drain() -> None:
    """Finding 4: `drain` turns the outermost feeders off; a member fed by an edge keeps its
    feeder on until its producer ends, which is not "more inputs may come: drain it"."""
    producer = definition_pb2.Transformation(
        transformation_id="sim", step="Sim", feeder="Seeds", feeder_enabled=False
    )
    consumer = definition_pb2.Transformation(
        transformation_id="reco",
        step="Reco",
        feeder="Edge",
        feeder_enabled=True,
        upstream_transformation_ids=["sim"],
    )
    held = [definition_pb2.DrainReason(kind="feeder", message="its feeder is enabled")]
    reco = MemberView(consumer, "Active", {}, {}, holding=held)
    view = WorkgraphView(
        definition_pb2.Workgraph(workgraph_id="wg", status=common_pb2.WORKGRAPH_STATUS_ACTIVE),
        [MemberView(producer, "Active", {}, {}), reco],
        [],
    )
    lines = member_reasons(view, reco)
    assert not any("dxts drain" in line or "is on" in line for line in lines)
    assert "  it takes the outputs of Sim as they come: its feeder ends once that has ended" in (
        lines
    )
    assert workgraph_reasons(view, everything=False)[0].startswith("nothing needs attention")


def test_watch_ends_with_its_own_code_on_attention_naming_the_reason() -> None:
    t = definition_pb2.Transformation(transformation_id="tf", step="Sim")
    view = a_workgraph(MemberView(t, "Active", {}, {}), [RATE])
    assert _ending(view) == EXIT_ATTENTION
    assert EXIT_ATTENTION not in (0, 1, 2, EXIT_BLOCKED, 4, 5)
    assert _ending_line(view, EXIT_ATTENTION) == f"wg needs attention: {attention.line(RATE)}"
    assert _ending(a_workgraph(MemberView(t, "Active", {}, {}))) is None
    # A blocked workgraph is "blocked" (3), as before, even with attention items.
    blocked = a_workgraph(
        MemberView(t, "FinalizingBlocked", {}, {}), [RATE], common_pb2.WORKGRAPH_STATUS_FINALIZING
    )
    assert _ending(blocked) == EXIT_BLOCKED
    # A failed check ends it as blocked once the lifecycle has moved it to ...Blocked: read a
    # moment before (the result is recorded first), watch goes on.
    check = definition_pb2.Attention(
        kind="action-failed", what="Approving check #3 ManualApproval failed", command="x"
    )
    pending = a_workgraph(
        MemberView(t, "Active", {}, {}), [check], common_pb2.WORKGRAPH_STATUS_APPROVING
    )
    assert _ending(pending) is None
    both = a_workgraph(MemberView(t, "Active", {}, {}), [check, RATE])
    assert _ending(both) == EXIT_ATTENTION
    assert _ending_line(both, EXIT_ATTENTION) == f"wg needs attention: {attention.line(RATE)}"


def test_a_row_is_marked_and_a_completed_workgraph_says_how_it_ended() -> None:
    assert attention.marker([]) == ""
    assert attention.marker([RATE]) == "! failure-rate"
    assert attention.marker([RATE, RATE]) == "! failure-rate +1"
    ended = definition_pb2.Workgraph(ended_with="2 written off")
    assert attention.status_text("Completed", ended) == "Completed with 2 written off"
    assert attention.status_text("Completed", definition_pb2.Workgraph()) == "Completed"


def test_a_feeder_held_by_a_quota_says_why_in_the_services_words() -> None:
    t = definition_pb2.Transformation(
        transformation_id="tf", step="Sim", feeder="Seeds", feeder_enabled=True
    )
    held = "held by a quota: the feeder reached the installation's limit of 30 inputs"
    reasons = [definition_pb2.DrainReason(kind="feeder", state="Held", message=held)]
    member = MemberView(t, "Active", {}, {}, holding=reasons)
    view = WorkgraphView(
        definition_pb2.Workgraph(workgraph_id="wg", status=common_pb2.WORKGRAPH_STATUS_ACTIVE),
        [member],
        [],
    )
    assert member_reasons(view, member) == ["Sim (tf) is Active", f"  its feeder Seeds is {held}"]
    # A hold: said without --all too.
    assert workgraph_reasons(view, everything=False) == [f"  its feeder Seeds is {held}"]
