"""DispatcherService: the push path for adaptors, the dispatcher's view of each backend, and a
parcel's job logs asked of the backend that ran it."""

from __future__ import annotations

from typing import Any

from dxts.core.adaptor import mapping
from dxts.core.errors import InvalidArgument, PermissionDenied
from dxts.core.grpc.convert import enum_to_proto, to_timestamp
from dxts.core.identity import current_identity
from dxts.core.ids import id_from_str
from dxts.core.kernel.authorisation import backend_of
from dxts.dispatcher.logic.backends import read_loads
from dxts.dispatcher.logic.forwarding import Forwarder
from dxts.dispatcher.logic.logs import parcel_logs
from dxts.dispatcher.logic.payloads import DefinitionSource
from dxts.v1 import common_pb2, dispatcher_pb2, dispatcher_pb2_grpc


class DispatcherServicer(dispatcher_pb2_grpc.DispatcherServiceServicer):
    def __init__(self, forwarder: Forwarder, definition: DefinitionSource) -> None:
        self.forwarder = forwarder
        self.definition = definition

    async def ReportOutcomes(
        self, request: dispatcher_pb2.ReportOutcomesRequest, context: Any
    ) -> dispatcher_pb2.ReportOutcomesResponse:
        groups: dict[str, list[int]] = {}
        for index, outcome in enumerate(request.outcomes):
            name = outcome.backend or request.backend
            if not name:
                raise InvalidArgument(
                    "no backend: set the request's or the outcome's", field=f"outcomes[{index}]"
                )
            groups.setdefault(name, []).append(index)
        _only_own_backend(set(groups))
        acks: list[common_pb2.OutcomeAck | None] = [None] * len(request.outcomes)
        for name, indexes in groups.items():
            answered = await self.forwarder.report(
                name, [mapping.outcome_from_proto(request.outcomes[i]) for i in indexes]
            )
            for index, ack in zip(indexes, answered, strict=True):
                acks[index] = mapping.ack_to_proto(ack)
        return dispatcher_pb2.ReportOutcomesResponse(acks=[a for a in acks if a is not None])

    async def DispatcherStatus(
        self, request: dispatcher_pb2.DispatcherStatusRequest, context: Any
    ) -> dispatcher_pb2.DispatcherStatusResponse:
        backends = self.forwarder.backends
        loads, now = await read_loads(self.forwarder.database, list(backends))
        return dispatcher_pb2.DispatcherStatusResponse(
            backends=[
                dispatcher_pb2.BackendStatus(
                    backend=name,
                    kind=enum_to_proto(backend.config.kind),  # type: ignore[arg-type]
                    reachable=backend.state.reachable,
                    capacity=backend.state.capacity,
                    in_flight=loads[name].assigned,
                    reserved=loads[name].reserved,
                    oldest_reserved_at=to_timestamp(loads[name].oldest_reserved_at),
                    refusals=backend.state.refusals,
                    last_poll_at=to_timestamp(backend.state.last_poll_at),
                    bad_outcomes=backend.state.bad_outcomes,
                    adaptor=backend.adaptor,
                )
                for name, backend in sorted(backends.items())
            ],
            as_of=to_timestamp(now),
        )

    async def GetParcelLogs(
        self, request: dispatcher_pb2.GetParcelLogsRequest, context: Any
    ) -> dispatcher_pb2.GetParcelLogsResponse:
        if request.max_bytes < 0:
            raise InvalidArgument("must not be negative", field="max_bytes")
        found = await parcel_logs(
            self.forwarder.database,
            self.forwarder.backends,
            self.definition,
            current_identity(),
            id_from_str(request.parcel_id, field="parcel_id"),
            request.max_bytes,
        )
        return dispatcher_pb2.GetParcelLogsResponse(
            parcel_id=request.parcel_id,
            backend=found.backend,
            identifier=found.identifier,
            logs=mapping.logs_to_proto(found.logs),
        )


def _only_own_backend(named: set[str]) -> None:
    """An adaptor reports the parcels of the backend its token names, nothing else: a report
    for another backend is refused whole, before anything is recorded."""
    caller = current_identity()
    own = backend_of(caller)
    others = sorted(named - {own}) if own is not None else sorted(named)
    if others:
        raise PermissionDenied(
            f"{caller.sub} may report outcomes of its own backend only, not of {', '.join(others)}"
        )
