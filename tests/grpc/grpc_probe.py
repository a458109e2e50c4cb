"""The test-only `dxts.test.Probe` service: built with grpc.method_handlers_generic_handler over
google.protobuf.StringValue, so that the contracts carry no test RPCs."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.wrappers_pb2 import StringValue

from dxts.core import errors
from dxts.core.deadlines import time_remaining
from dxts.core.grpc import Service, channel
from dxts.core.identity import current_identity
from dxts.core.kernel.authorisation import CallerKind, Rules

PROBE = "dxts.test.Probe"
PROBE_METHODS = ("Raise", "Abort", "WhoAmI", "Remaining", "Nested")
# The probe is outside the contracts: its rows, passed to the servers that serve it (any caller).
PROBE_RULES: Rules = {f"/{PROBE}/{name}": frozenset(CallerKind) for name in PROBE_METHODS}

ERRORS: dict[str, Callable[[], BaseException]] = {
    "invalid_argument": lambda: errors.InvalidArgument(
        [
            errors.FieldViolation("steps.merge.in.input-data", "unknown source 'nowhere'"),
            errors.FieldViolation("hints.dirac:Transformation.packer", "not registered"),
        ]
    ),
    "not_found": lambda: errors.NotFound("workgraph", "0190f1c2-7a4b-7c3d-8e9f-0123456789ab"),
    "invalid_transition": lambda: errors.InvalidTransition(
        "workgraph",
        "Completed",
        "Active",
        actor="operator",
        identifier="0190f1c2-7a4b-7c3d-8e9f-0123456789ab",
    ),
    "failed_precondition": lambda: errors.FailedPrecondition(
        "drain the workgraph first", current_state="Active"
    ),
    "permission_denied": lambda: errors.PermissionDenied("only the owner may halt it"),
    "unauthenticated": lambda: errors.Unauthenticated("token revoked"),
    "aborted": lambda: errors.Aborted("deadlock persisted after 6 attempts; retry the operation"),
    "unavailable": lambda: errors.Unavailable("database unreachable"),
    "already_exists": lambda: errors.AlreadyExists("lhcb/merge@1.0 is already published"),
    "bug": lambda: RuntimeError("secret internals at /srv/dxts/config.yaml"),
}


@dataclass
class Probe:
    """The test servicer; `address` and `token` let it call itself (nested calls)."""

    address: str = ""
    token: str = ""
    nested_timeout: float | None = None
    seen: list[Any] = field(default_factory=list)

    async def raise_(self, request: StringValue, context: Any) -> StringValue:
        raise ERRORS[request.value]()

    async def abort(self, request: StringValue, context: Any) -> StringValue:
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down")
        raise AssertionError("abort returned")

    async def who_am_i(self, request: StringValue, context: Any) -> StringValue:
        identity = current_identity()
        return StringValue(value=json.dumps([identity.vo, identity.sub, sorted(identity.roles)]))

    async def remaining(self, request: StringValue, context: Any) -> StringValue:
        return StringValue(
            value=json.dumps({"context": context.time_remaining(), "inherited": time_remaining()})
        )

    async def nested(self, request: StringValue, context: Any) -> StringValue:
        """Calls Remaining on the same server, as a service calls another."""
        async with channel(self.address, token=self.token) as ch:
            answer = await unary(ch, "Remaining")(StringValue(), timeout=self.nested_timeout)
        outer = {"context": context.time_remaining(), "inherited": time_remaining()}
        return StringValue(value=json.dumps({"outer": outer, "nested": json.loads(answer.value)}))

    def service(self) -> Service:
        def method(behaviour: Callable[..., Any]) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(
                behaviour,
                request_deserializer=StringValue.FromString,
                response_serializer=StringValue.SerializeToString,
            )

        handler = grpc.method_handlers_generic_handler(
            PROBE,
            {
                "Raise": method(self.raise_),
                "Abort": method(self.abort),
                "WhoAmI": method(self.who_am_i),
                "Remaining": method(self.remaining),
                "Nested": method(self.nested),
            },
        )
        return Service.generic(PROBE, handler)


def unary(ch: grpc.aio.Channel, name: str) -> Any:
    return ch.unary_unary(
        f"/{PROBE}/{name}",
        request_serializer=StringValue.SerializeToString,
        response_deserializer=StringValue.FromString,
    )
