"""The steering verbs of the pages: the CLI's, each one definition RPC, called with the
user's token and a fresh request id. What the service refuses is shown as it refused it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dxts.core.grpc.calls import method_on, request_type
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

    @property
    def asks_message(self) -> bool:
        """Forcing an action records a message on it; every other verb asks a reason."""
        return self.rpc is Definition.ForceAction


WORKGRAPH_VERBS = {
    v.name: v
    for v in (
        Verb(
            "start",
            "Start",
            Definition.StartWorkgraph,
            "Start the workgraph (scouting first if it scouts).",
        ),
        Verb(
            "drain",
            "Drain",
            Definition.DrainWorkgraph,
            "Stop feeding; the work in flight finishes.",
        ),
        Verb(
            "halt",
            "Halt",
            Definition.HaltWorkgraph,
            "Cancel the parcels in flight and write off every waiting input.",
            danger=True,
        ),
        Verb(
            "cancel",
            "Cancel",
            Definition.CancelWorkgraph,
            "Cancel the workgraph: its members clean up (outputs removed).",
            danger=True,
        ),
        Verb(
            "return",
            "Return to Active",
            Definition.ReturnToActive,
            "Back to Active from Finalizing.",
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
        ),
        Verb(
            "resume",
            "Resume",
            Definition.ResumeTransformation,
            "Carry on from where it was paused.",
        ),
        Verb(
            "flush", "Flush", Definition.FlushTransformation, "Pack what the packer holds back now."
        ),
        Verb(
            "feeder-enable",
            "Enable feeder",
            Definition.SetFeeder,
            "Let the feeder add inputs again.",
        ),
        Verb(
            "feeder-disable",
            "Disable feeder",
            Definition.SetFeeder,
            "Stop the feeder adding inputs.",
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
    """Call the verb's RPC; a refusal raises the domain error the service answered."""
    verb = verbs[name]
    await method_on(clients.definition, verb.rpc)(_request(verb, target, reason))
