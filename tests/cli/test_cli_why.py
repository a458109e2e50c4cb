"""`dxts why` words the drain guard's own reasons (GetDrainStatus), each with what helps."""

from __future__ import annotations

from dxts.cli.inspect import member_reasons
from dxts.cli.workgraphs import MemberView, WorkgraphView
from dxts.v1 import common_pb2, definition_pb2


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
    view = WorkgraphView(
        definition_pb2.Workgraph(workgraph_id="wg", status=common_pb2.WORKGRAPH_STATUS_ACTIVE),
        [member],
        [],
    )
    assert member_reasons(view, member) == [
        "Sim (tf) is Paused",
        "  paused: its packer makes no parcels (dxts resume tf)",
        "  2 Problematic inputs wait for you: see dxts inputs tf --status Problematic, then "
        "dxts inputs reset or write-off",
        "  parcels in flight: Assigned 1",
        "  inputs still to process: Unassigned 3",
        "  its feeder Seeds is on: more inputs may come (dxts feeder show tf; dxts drain wg "
        "stops feeding)",
    ]
    member.holding = []
    assert member_reasons(view, member) == ["Sim (tf) is Paused"]


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
