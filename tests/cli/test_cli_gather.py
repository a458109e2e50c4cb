"""What `show`, `watch` and `why` read: a blocked status always comes with the action blocking it.

The workgraph and each member are read from definition with their actions, and the counts from
accounting a moment later; between the reads an operator may reset the failed action and the
lifecycle run it again. These tests play such an interleaving with stub services."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from dxts.cli.workgraphs import gather
from dxts.v1 import accounting_pb2, common_pb2, definition_pb2

WG, TF = "wg-1", "tf-1"
FAILED, UNSET = common_pb2.ACTION_RESULT_FAILED, common_pb2.ACTION_RESULT_UNSPECIFIED


def approval(result: int) -> definition_pb2.Action:
    return definition_pb2.Action(action_id=7, action="ManualApproval", result=result)


class Definition:
    """Answers from its current state; `then` moves it on after the first workgraph read."""

    def __init__(self, workgraph_status: int, member_status: int, result: int) -> None:
        self.workgraph_status, self.member_status, self.result = (
            workgraph_status,
            member_status,
            result,
        )
        self.then: dict[str, int] = {}

    async def GetWorkgraph(self, request: Any) -> definition_pb2.GetWorkgraphResponse:
        reply = definition_pb2.GetWorkgraphResponse(
            workgraph=definition_pb2.Workgraph(workgraph_id=WG, status=self.workgraph_status),
            members=[self.member()],
            actions=[approval(self.result)],
        )
        for key, value in self.then.items():
            setattr(self, key, value)
        return reply

    async def GetTransformation(self, request: Any) -> definition_pb2.GetTransformationResponse:
        return definition_pb2.GetTransformationResponse(
            transformation=self.member(), actions=[approval(self.result)]
        )

    def member(self) -> definition_pb2.Transformation:
        return definition_pb2.Transformation(transformation_id=TF, status=self.member_status)


class Accounting:
    """The summary as accounting builds it: the statuses as definition says them now."""

    def __init__(self, definition: Definition) -> None:
        self.definition = definition

    async def GetWorkgraphSummary(self, request: Any) -> accounting_pb2.GetWorkgraphSummaryResponse:
        now = self.definition
        return accounting_pb2.GetWorkgraphSummaryResponse(
            workgraph_id=WG,
            status=now.workgraph_status,
            members=[accounting_pb2.MemberSummary(transformation_id=TF, status=now.member_status)],
        )


def read(definition: Definition) -> Any:
    clients = SimpleNamespace(definition=definition, accounting=Accounting(definition))
    return asyncio.run(gather(clients, WG))  # type: ignore[arg-type]


def test_a_workgraph_blocked_again_after_its_read_is_shown_as_read() -> None:
    """Read while Approving (the action just reset), blocked again before the counts are read:
    the workgraph is shown Approving, not blocked by nothing."""
    definition = Definition(
        common_pb2.WORKGRAPH_STATUS_APPROVING, common_pb2.TRANSFORMATION_STATUS_ACTIVE, UNSET
    )
    definition.then = {
        "workgraph_status": common_pb2.WORKGRAPH_STATUS_APPROVING_BLOCKED,
        "result": FAILED,
    }
    view = read(definition)
    assert view.status.value == "Approving"
    assert not view.blocked and view.blocked_by == []


def test_a_blocked_workgraph_names_its_failed_action() -> None:
    definition = Definition(
        common_pb2.WORKGRAPH_STATUS_APPROVING_BLOCKED,
        common_pb2.TRANSFORMATION_STATUS_ACTIVE,
        FAILED,
    )
    view = read(definition)
    assert view.blocked and [a.action for a in view.blocked_by] == ["ManualApproval"]


def test_a_member_reset_between_the_reads_is_shown_as_its_actions_say() -> None:
    """Counted while FinalizingBlocked, its check reset before its actions are read: the member
    is shown with the status read with those actions."""
    definition = Definition(
        common_pb2.WORKGRAPH_STATUS_ACTIVE,
        common_pb2.TRANSFORMATION_STATUS_FINALIZING_BLOCKED,
        FAILED,
    )

    async def reset_before_the_detail(request: Any) -> accounting_pb2.GetWorkgraphSummaryResponse:
        reply = await Accounting(definition).GetWorkgraphSummary(request)
        definition.member_status = common_pb2.TRANSFORMATION_STATUS_FINALIZING
        definition.result = UNSET
        return reply

    clients = SimpleNamespace(
        definition=definition,
        accounting=SimpleNamespace(GetWorkgraphSummary=reset_before_the_detail),
    )
    view = asyncio.run(gather(clients, WG))  # type: ignore[arg-type]
    (member,) = view.members
    assert member.status == "Finalizing"
    assert not member.blocked and not view.blocked
