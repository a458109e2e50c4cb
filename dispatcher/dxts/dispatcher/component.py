"""The dispatcher assembled: backends, the definition source, the outcome sink, its sweeps and
its gRPC service. `dxts-dispatcher` (`__main__`) serves it alone; `dxts up` composes it.

    component = await build_dispatcher(database, settings=DispatcherSettings())
    server = GrpcServer([*component.services, ...], ...)
    ...
    await component.stop()

Sweeps (`dxts.core.kernel.sweeps`: a round that did work is followed at once by the next, an
idle one waits up to its interval, a failed one is logged and backs off):

* `settings.claimers` claim sweeps per kind some backend takes (several replicas and several
  sweeps claim side by side: SKIP LOCKED keeps their batches disjoint), idle up to `idle_s`;
* per backend, a poll sweep (idle up to `poll_interval_s`) and a cancel sweep (idle up to
  `cancel_interval_s`);
* recovery of stale Reserved parcels every `recovery_interval_s` (a parcel becomes stale with
  time, not with work, so this one keeps its interval);
* every `status_interval_s`, Describe each backend (capacity, push or pull) and refresh the
  per-backend load the claim budget and the gauges use.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import grpc

from dxts.core.component import Component
from dxts.core.config import DefinitionConfig, load_installation_config
from dxts.core.db import Database
from dxts.core.grpc import Service, channel
from dxts.core.kernel.authorisation import CallerKind
from dxts.core.kernel.sweeps import Pacing, Sweep, SweepRunner
from dxts.core.locks import LockManager
from dxts.dispatcher.edge.backends import GrpcAdaptorCalls
from dxts.dispatcher.edge.clients import GrpcDefinitionSource, GrpcOutcomeSink
from dxts.dispatcher.edge.servicer import DispatcherServicer
from dxts.dispatcher.logic.backends import Backend, BackendUnreachable, read_loads
from dxts.dispatcher.logic.dispatch import Dispatcher
from dxts.dispatcher.logic.forwarding import Forwarder
from dxts.dispatcher.logic.outcomes import OutcomeSink
from dxts.dispatcher.logic.payloads import DefinitionSource, Materialiser
from dxts.dispatcher.metrics import IN_FLIGHT, OLDEST_RESERVED, RESERVED, UNREACHABLE
from dxts.dispatcher.settings import DispatcherSettings
from dxts.v1 import dispatcher_pb2, dispatcher_pb2_grpc

log = logging.getLogger(__name__)

# The dispatcher's own subject when it mints a development token (single machine only).
SERVICE_SUB = "dxts-dispatcher"
# A peer that comes back is used again within a second or so, not after grpc's default backoff
# (up to two minutes), during which every call fails at once.
RECONNECT = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 5000),
)

CLAIM_SWEEP_PREFIX = "dispatch-claim-"
POLL_SWEEP_PREFIX = "dispatch-poll-"
# A round in progress at stop is short (one claim, submit and record; one poll page).
STOP_GRACE_S = 5.0


@dataclass(kw_only=True)
class DispatcherComponent(Component):
    """The dispatcher: its service, and its sweeps (built from its backends, run by `start`
    after a first `refresh`). A round in progress at `stop` gets `stop_grace_s`; one cancelled
    leaves at most Reserved parcels, which the recovery sweep closes."""

    dispatcher: Dispatcher
    forwarder: Forwarder
    backends: dict[str, Backend]

    async def refresh(self) -> None:
        """Describe every backend and refresh the loads (claim budget, gauges)."""
        for backend in self.backends.values():
            try:
                await backend.describe()
            except BackendUnreachable as error:
                UNREACHABLE.labels(backend.name, error.rpc).inc()
                log.warning("%s", error)
        loads, now = await read_loads(self.dispatcher.database, list(self.backends))
        for name, load in loads.items():
            self.backends[name].state.in_flight = load.reserved + load.assigned
            IN_FLIGHT.labels(name).set(load.assigned)
            RESERVED.labels(name).set(load.reserved)
            age = (now - load.oldest_reserved_at).total_seconds() if load.oldest_reserved_at else 0
            OLDEST_RESERVED.labels(name).set(max(0.0, age))

    def wake_claims(self) -> None:
        """Claim now (new Unassigned parcels), not after the claim sweeps' idle wait."""
        if self.runner is not None:
            for name in self.runner.sweeps:
                if name.startswith(CLAIM_SWEEP_PREFIX):
                    self.runner.wake(name)

    def wake_poll(self, backend: str) -> None:
        """Poll `backend` now (an outcome is ready there), not after the poll interval."""
        if self.runner is not None and f"{POLL_SWEEP_PREFIX}{backend}" in self.runner.sweeps:
            self.runner.wake(f"{POLL_SWEEP_PREFIX}{backend}")

    async def status_round(self) -> int:
        """The status sweep's round: a refresh, not work done (0: it keeps its interval)."""
        await self.refresh()
        return 0

    async def recover(self) -> int:
        """Re-submit every stale Reserved parcel, batch by batch; returns how many."""
        recovered = 0
        for kind in self.dispatcher.policy.kinds():
            while done := await self.dispatcher.recover_once(kind):
                recovered += done
        return recovered

    def sweeps(self) -> list[Sweep]:
        """Every sweep of this replica (see the module docstring)."""
        settings = self.dispatcher.settings
        # What a claim submitted, the polls ask about at once (a backend may finish quickly;
        # routes may send a kind's parcels to any backend, so every poll is woken).
        polls = tuple(f"dispatch-poll-{name}" for name in self.backends)
        every = [
            Sweep(
                f"{CLAIM_SWEEP_PREFIX}{kind.value.lower()}-{n}",
                functools.partial(self.dispatcher.dispatch_once, kind),
                Pacing(settings.idle_s),
                then=polls,
            )
            for kind in self.dispatcher.policy.kinds()
            for n in range(settings.claimers)
        ]
        for backend in self.backends.values():
            every += [
                Sweep(
                    f"{POLL_SWEEP_PREFIX}{backend.name}",
                    functools.partial(self.forwarder.poll_once, backend),
                    Pacing(settings.poll_interval_s),
                ),
                Sweep(
                    f"dispatch-cancel-{backend.name}",
                    functools.partial(self.forwarder.cancel_once, backend),
                    Pacing(settings.cancel_interval_s),
                ),
            ]
        return [
            *every,
            Sweep(
                "dispatch-recovery",
                self.recover,
                Pacing(settings.recovery_interval_s, first_idle_s=settings.recovery_interval_s),
            ),
            Sweep(
                "dispatch-status",
                self.status_round,
                Pacing(settings.status_interval_s, first_idle_s=settings.status_interval_s),
            ),
        ]



def service_token(settings: DispatcherSettings) -> str | None:
    """The dispatcher's own token, as `ServiceTokenSettings.own_token` finds it."""
    return settings.own_token(SERVICE_SUB, CallerKind.DISPATCHER)


async def build_dispatcher(
    database: Database,
    *,
    settings: DispatcherSettings,
    definition: DefinitionSource | None = None,
    sink: OutcomeSink | None = None,
    config: DefinitionConfig | None = None,
    token: str | None = None,
    start_sweeps: bool = True,
) -> DispatcherComponent:
    """The dispatcher over a started `database`. `definition` and `sink` default to the gRPC
    ones at `settings.definition_address` / `execution_address`; `token` to `service_token()`.
    With `start_sweeps` false nothing runs until the caller drives it (tests, benchmarks)."""
    token = token if token is not None else service_token(settings)
    channels: list[grpc.aio.Channel] = []

    def open_channel(address: str) -> grpc.aio.Channel:
        opened = channel(
            address, token=token, default_timeout=settings.call_timeout_s, options=RECONNECT
        )
        channels.append(opened)
        return opened

    if definition is None:
        if not settings.definition_address:
            raise ValueError("DXTS_DEFINITION_ADDRESS is not set")
        definition = GrpcDefinitionSource(
            open_channel(settings.definition_address), timeout_s=settings.call_timeout_s
        )
    if sink is None:
        if not settings.execution_address:
            raise ValueError("DXTS_EXECUTION_ADDRESS is not set")
        sink = GrpcOutcomeSink(
            open_channel(settings.execution_address), timeout_s=settings.call_timeout_s
        )
    if config is None:
        config = load_installation_config(settings.config_file).definition
    backends = {
        b.name: Backend(
            b, GrpcAdaptorCalls(b.name, open_channel(b.address), settings.call_timeout_s)
        )
        for b in settings.backends
    }
    locks = LockManager(database)
    dispatcher = Dispatcher(database, settings, backends, Materialiser(definition, config), sink)
    forwarder = Forwarder(database, settings, backends, sink, locks)
    servicer = DispatcherServicer(forwarder, definition)
    component = DispatcherComponent(
        dispatcher=dispatcher,
        forwarder=forwarder,
        backends=backends,
        services=[
            Service.of(
                dispatcher_pb2.DESCRIPTOR.services_by_name["DispatcherService"],
                dispatcher_pb2_grpc.add_DispatcherServiceServicer_to_server,
                servicer,
            )
        ],
        stop_grace_s=STOP_GRACE_S,
        cleanups=[locks.dispose, *(ch.close for ch in channels)],
    )
    component.runner = SweepRunner(component.sweeps())
    component.on_start.append(component.refresh)
    if start_sweeps:
        await component.start()
    return component
