"""The steering verbs of the pages: the CLI's, each one definition RPC, called with the
user's token and a fresh request id. What the service refuses is shown as it refused it.

A page offers a verb only in the states it can be used from (`Verb.when`, read from the state
machines of dxts.core.state_machines and the services' own preconditions): a Completed
workgraph offers none, a member's Pause shows only while it is Active. The service still
decides: a verb offered a moment too late is refused in its words."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dxts.core.errors import DxtsError
from dxts.core.grpc.calls import method_on, request_type
from dxts.core.state_machines import TRANSFORMATION, WORKGRAPH, Actor
from dxts.core.states import TransformationStatus, WorkgraphStatus
from dxts.v1 import common_pb2
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer as Definition
from dxts.web.services import UserClients


@dataclass(frozen=True)
class Verb:
    name: str
    title: str
    rpc: Callable[..., object]  # the servicer's method: a renamed RPC fails at import
    explains: str
    danger: bool = False
    # The states the verb can be used from; empty: any.
    when: frozenset[str] = frozenset()
    # For the feeder verbs: offered only when the feeder is the other way (None: either).
    feeder_on: bool | None = None

    def offered(self, status: str, feeder_enabled: bool | None = None) -> bool:
        """Whether a page in `status` offers the verb."""
        if self.when and status not in self.when:
            return False
        return self.feeder_on is None or feeder_enabled is None or feeder_enabled == self.feeder_on

    @property
    def asks_message(self) -> bool:
        """Forcing an action records a message on it; every other verb asks a reason."""
        return self.rpc is Definition.ForceAction


W, T = WorkgraphStatus, TransformationStatus
OP = Actor.OPERATOR
# The feeder can be changed while the member runs (the definition service's FEEDER_STATES).
FEEDER_STATES = frozenset({T.NEW, T.ACTIVE, T.PAUSED})


def _from(machine: Any, *targets: str) -> frozenset[str]:
    """The states an operator can move to one of `targets` from."""
    return frozenset(s for target in targets for s in machine.sources_of(target, OP))


WORKGRAPH_VERBS = {
    v.name: v
    for v in (
        Verb(
            "start",
            "Start",
            Definition.StartWorkgraph,
            "Start the workgraph (scouting first if it scouts).",
            when=frozenset({W.NEW}),
        ),
        Verb(
            "drain",
            "Drain",
            Definition.DrainWorkgraph,
            "Stop feeding; the work in flight finishes.",
            when=frozenset({W.ACTIVE}),
        ),
        Verb(
            "halt",
            "Halt",
            Definition.HaltWorkgraph,
            "Cancel the parcels in flight and write off every waiting input.",
            danger=True,
            when=frozenset({W.ACTIVE}),
        ),
        Verb(
            "cancel",
            "Cancel",
            Definition.CancelWorkgraph,
            "Cancel the workgraph: its members clean up (outputs removed).",
            danger=True,
            when=_from(WORKGRAPH, W.CANCELLING),
        ),
        Verb(
            "return",
            "Return to Active",
            Definition.ReturnToActive,
            "Back to Active from Finalizing.",
            when=frozenset({W.FINALIZING}),
        ),
    )
}
MEMBER_VERBS = {
    v.name: v
    for v in (
        Verb(
            "pause",
            "Pause",
            Definition.PauseTransformation,
            "Stop packing and submitting new parcels.",
            when=_from(TRANSFORMATION, T.PAUSED),
        ),
        Verb(
            "resume",
            "Resume",
            Definition.ResumeTransformation,
            "Carry on from where it was paused.",
            when=frozenset({T.PAUSED}),
        ),
        Verb(
            "flush",
            "Flush",
            Definition.FlushTransformation,
            "Pack what the packer holds back now.",
            when=frozenset({T.ACTIVE}),
        ),
        Verb(
            "feeder-enable",
            "Enable feeder",
            Definition.SetFeeder,
            "Let the feeder add inputs again.",
            when=FEEDER_STATES,
            feeder_on=False,
        ),
        Verb(
            "feeder-disable",
            "Disable feeder",
            Definition.SetFeeder,
            "Stop the feeder adding inputs.",
            when=FEEDER_STATES,
            feeder_on=True,
        ),
    )
}
ACTION_VERBS = {
    v.name: v
    for v in (
        Verb(
            "force-passed", "Force Passed", Definition.ForceAction, "Record the action as Passed."
        ),
        Verb("force-done", "Force Done", Definition.ForceAction, "Record the action as Done."),
        Verb(
            "force-failed", "Force Failed", Definition.ForceAction, "Record the action as Failed."
        ),
        Verb("reset", "Reset", Definition.ResetAction, "Forget its result: it runs again."),
    )
}
# An action can be forced or reset when it is the one holding its owner: it failed, or has not
# finished, in the state the owner is in.
STUCK_RESULTS = (common_pb2.ACTION_RESULT_FAILED, common_pb2.ACTION_RESULT_PENDING)


def actionable(action: Any, owner_status: str) -> bool:
    """Whether a page offers Force/Reset on `action` of an owner in `owner_status`."""
    return bool(action.state) and action.state in owner_status and action.result in STUCK_RESULTS


_FORCED = {
    "force-passed": common_pb2.ACTION_RESULT_PASSED,
    "force-done": common_pb2.ACTION_RESULT_DONE,
    "force-failed": common_pb2.ACTION_RESULT_FAILED,
}


def _request(verb: Verb, target: str, reason: str) -> Any:
    """The verb's request for `target` (a workgraph, transformation or action id)."""
    request_id = str(uuid.uuid4())
    build = request_type(verb.rpc)
    if verb in WORKGRAPH_VERBS.values():
        return build(request_id=request_id, workgraph_id=target, reason=reason)
    if verb.name.startswith("feeder-"):
        return build(
            request_id=request_id,
            transformation_id=target,
            enabled=verb.name == "feeder-enable",
            reason=reason,
        )
    if verb in MEMBER_VERBS.values():
        return build(request_id=request_id, transformation_id=target, reason=reason)
    if verb.name == "reset":
        return build(request_id=request_id, action_id=int(target), reason=reason)
    return build(
        request_id=request_id, action_id=int(target), result=_FORCED[verb.name], message=reason
    )


async def steer(
    clients: UserClients, verbs: Mapping[str, Verb], name: str, target: str, reason: str
) -> None:
    """Call the verb's RPC; a refusal raises the domain error the service answered, and so does
    a flush whose packer failed (the call ran: its reply says why the packer stopped)."""
    verb = verbs[name]
    reply = await method_on(clients.definition, verb.rpc)(_request(verb, target, reason))
    failure = getattr(reply, "failure", "")
    if failure:
        raise DxtsError(
            f"the flush ran, but its packer failed ({getattr(reply, 'failure_class', '')}): "
            f"{failure}"
        )
