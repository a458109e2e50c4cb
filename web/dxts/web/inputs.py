"""Acting on a member's failed inputs from the page that shows them: write them off (they
become NotProcessed, and the member can finish without them) or reset them (Problematic back
to Unassigned with no errors counted, to be tried again) — ExecutionService.WriteOffInputs and
ResetInputs, the calls `dxts inputs write-off` and `dxts inputs reset` make, with the user's
token, a fresh request id and the reason typed on the confirmation page.

A selection is either inputs by id (ticked on the member page, at most MAX_SELECTED) or every
input of the member in a status the verb applies to (`status=Problematic`: "all of them").
Each verb is offered only for the statuses the input state machine lets an operator move
(dxts.core.state_machines.INPUT): reset from Problematic, write-off from Unassigned, Failed
(by the core only: not offered) and Problematic."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dxts.core.errors import InvalidArgument
from dxts.core.grpc.calls import method_on, request_type
from dxts.core.state_machines import INPUT, Actor
from dxts.core.states import InputStatus
from dxts.v1 import execution_pb2
from dxts.v1.execution_pb2_grpc import ExecutionServiceServicer as Execution
from dxts.web.members import input_statuses
from dxts.web.services import UserClients

MAX_SELECTED = 1000  # one page of ids, as the service bounds a selection


@dataclass(frozen=True)
class InputVerb:
    name: str
    title: str
    rpc: Callable[..., object]
    explains: str
    target: str  # the input status it moves inputs to
    danger: bool = False
    # The statuses its RPC takes, when fewer than the operator's edges to `target` (a reset
    # takes Problematic inputs; a Failed one is decided one by one, `dxts inputs decide`).
    only: frozenset[str] | None = None

    @property
    def applies_to(self) -> frozenset[str]:
        """The statuses an operator can move an input out of with this verb."""
        sources = INPUT.sources_of(self.target, Actor.OPERATOR)
        return sources if self.only is None else sources & self.only

    @property
    def asks_message(self) -> bool:
        return False


INPUT_VERBS = {
    v.name: v
    for v in (
        InputVerb(
            "write-off",
            "Write off",
            Execution.WriteOffInputs,
            "The inputs become NotProcessed: nothing will be made from them, and the member "
            "can finish without them.",
            InputStatus.NOT_PROCESSED,
            danger=True,
        ),
        InputVerb(
            "reset",
            "Reset",
            Execution.ResetInputs,
            "The inputs go back to Unassigned with no error counted: they will be packed and "
            "run again.",
            InputStatus.UNASSIGNED,
            only=frozenset({InputStatus.PROBLEMATIC}),
        ),
    )
}


@dataclass(frozen=True)
class Selection:
    input_ids: tuple[str, ...] = ()
    status: str = ""  # every input in this status

    def describe(self) -> str:
        if self.status:
            return f"every {self.status} input"
        count = len(self.input_ids)
        return f"{count} input" + ("" if count == 1 else "s")

    def proto(self) -> execution_pb2.InputSelection:
        if self.status:
            return execution_pb2.InputSelection(statuses=input_statuses(self.status))
        return execution_pb2.InputSelection(input_ids=list(self.input_ids))


def selection_of(verb: InputVerb, ids: Sequence[str], status: str) -> Selection:
    """The inputs a request names; bad input is one clear line (InvalidArgument)."""
    if status:
        if status not in verb.applies_to:
            allowed = ", ".join(sorted(verb.applies_to))
            raise InvalidArgument(
                f"{verb.title.lower()} applies to inputs {allowed}, not {status}", field="status"
            )
        return Selection(status=status)
    chosen = tuple(dict.fromkeys(i.strip() for i in ids if i.strip()))
    if not chosen:
        raise InvalidArgument("no input selected: tick at least one", field="input")
    if len(chosen) > MAX_SELECTED:
        raise InvalidArgument(
            f"{len(chosen)} inputs selected: at most {MAX_SELECTED} at once, or all of a status",
            field="input",
        )
    return Selection(input_ids=chosen)


async def act(
    clients: UserClients, verb: InputVerb, transformation_id: str, chosen: Selection, reason: str
) -> int:
    """Call the verb's RPC; how many inputs moved. A refusal raises the service's error."""
    build = request_type(verb.rpc)
    reply = await method_on(clients.execution, verb.rpc)(
        build(
            request_id=str(uuid.uuid4()),
            transformation_id=transformation_id,
            selection=chosen.proto(),
            reason=reason,
        )
    )
    return int(getattr(reply, "written_off_count", 0) or getattr(reply, "reset_count", 0))
