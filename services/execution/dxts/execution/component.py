"""The execution component assembled: its gRPC service and its sweeps, ready to be served.

`dxts-execution` (`__main__`) serves it alone; `dxts up` composes it with the other components
in one process and one event loop:

    execution = await build_execution(database, settings=..., registry=Registry.discover(),
                                      catalogue=catalogue, definition_client=..., locks=...)
    server = GrpcServer([*execution.services, ...], settings=..., verifier=...)
    ...
    await execution.stop()

It is a `dxts.core.component.Component`: `start` runs its sweeps, `stop` ends them.

What the plugins may be injected with comes from here (`plugin_providers`): the file catalogue
and execution's implementations of the built-ins' read-only Protocols. The registry is checked
at build time, so an extension whose parameters nothing provides stops the process at start-up.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dxts.core.catalogue import FileCatalogue, ScopedCatalogue
from dxts.core.component import Component
from dxts.core.db import Database
from dxts.core.grpc import Service, channel
from dxts.core.kernel.sweeps import SweepRunner
from dxts.core.locks import LockManager
from dxts.core.plugins import Providers, Registry
from dxts.core.plugins.protocols.readers import (
    ConsumerLookup,
    InputOverviewReader,
    ParcelOutputReader,
    PartnerLookup,
)
from dxts.execution.edge.definition_client import GrpcTransformations
from dxts.execution.edge.servicer import ExecutionServicer
from dxts.execution.logic.feeding import EdgeReader
from dxts.execution.logic.packing import ConsumerReader, CounterReader, PartnerFinder
from dxts.execution.logic.sweeps import RECORDER_SWEEP, Completion, FeedAndPack
from dxts.execution.logic.transformations import ActiveSnapshot, ActiveTransformations
from dxts.execution.settings import ExecutionSettings
from dxts.v1 import execution_pb2, execution_pb2_grpc

# Execution's own subject when it mints a development token (single machine only).
SERVICE_SUB = "dxts-execution"
# A definition service that comes back is used again within a second or so.
RECONNECT = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 5000),
)


def install_providers(
    providers: Providers,
    database: Database,
    snapshot: ActiveSnapshot,
    catalogue: FileCatalogue | None,
    *,
    watermark_interval_s: float,
) -> Providers:
    """Add what execution injects into plugins (those `providers` does not have yet): the file
    catalogue, and execution's implementations of the built-ins' read-only Protocols."""
    offered: list[tuple[Any, Any]] = [
        (
            ParcelOutputReader,
            EdgeReader(database, snapshot, watermark_interval_s=watermark_interval_s),
        ),
        (InputOverviewReader, CounterReader(database)),
        (PartnerLookup, PartnerFinder(database, snapshot)),
        (ConsumerLookup, ConsumerReader(database)),
    ]
    if catalogue is not None:
        # Plugins see the catalogue through the scope of the work they do (`files_of`).
        offered.append((FileCatalogue, ScopedCatalogue(catalogue)))
    for annotation, instance in offered:
        if not providers.can_provide(annotation):
            providers.add(annotation, instance)
    return providers


def service_token(settings: ExecutionSettings) -> str | None:
    """Execution's own token, as `ServiceTokenSettings.own_token` finds it."""
    return settings.own_token(SERVICE_SUB, settings.service_role)


@dataclass(kw_only=True)
class Execution(Component):
    """A built execution component: its service, and the runner of its rounds (`rounds` and
    `completion`, which tests also drive one at a time). `stop` releases what the component
    opened, not the database nor the catalogue."""

    rounds: FeedAndPack
    completion: Completion | None  # None without a catalogue to record outputs in
    servicer: ExecutionServicer
    settings: ExecutionSettings


async def build_execution(
    database: Database,
    *,
    settings: ExecutionSettings | None = None,
    registry: Registry | None = None,
    catalogue: FileCatalogue | None = None,
    definition_client: ActiveTransformations | None = None,
    locks: LockManager | None = None,
    start_sweeps: bool = True,
) -> Execution:
    """The execution service over a started `database`.

    `registry` defaults to every installed plugin (`Registry.discover()`); it is given
    execution's providers and checked, so a plugin nothing can be injected into stops the
    process here. `catalogue` (started) is what plugins and the outcome recorder use.
    `definition_client` defaults to the definition service at `settings.definition_address`
    with execution's service token; `locks` to a LockManager of its own. With `start_sweeps`
    false nothing runs in the background (tests drive the sweeps).
    """
    settings = settings or ExecutionSettings()
    if start_sweeps and catalogue is None:
        raise ValueError("the completion sweeps record outputs in a file catalogue: give one")
    cleanups: list[Callable[[], object]] = []
    if definition_client is None:
        if not settings.definition_address:
            raise ValueError("DXTS_DEFINITION_ADDRESS is not set: execution needs definition")
        opened = channel(
            settings.definition_address,
            token=service_token(settings),
            default_timeout=settings.call_timeout_s,
            options=RECONNECT,
        )
        cleanups.append(opened.close)
        definition_client = GrpcTransformations(opened)
    if locks is None:
        locks = LockManager(database)
        cleanups.append(locks.dispose)
    snapshot = ActiveSnapshot(definition_client)
    registry = registry if registry is not None else Registry.discover()
    install_providers(
        registry.providers,
        database,
        snapshot,
        catalogue,
        watermark_interval_s=settings.watermark_interval_s,
    )
    registry.check()
    rounds = FeedAndPack(
        database, registry=registry, locks=locks, snapshot=snapshot, settings=settings
    )
    completion = None
    if catalogue is not None:
        completion = Completion(
            database,
            registry=registry,
            catalogue=catalogue,
            snapshot=snapshot,
            locks=locks,
            settings=settings,
        )
    sweeps = SweepRunner([*rounds.sweeps(), *(completion.sweeps() if completion else [])])
    servicer = ExecutionServicer(
        database,
        transformations=definition_client,
        snapshot=snapshot,
        registry=registry,
        locks=locks,
        settings=settings,
    )
    service = Service.of(
        execution_pb2.DESCRIPTOR.services_by_name["ExecutionService"],
        execution_pb2_grpc.add_ExecutionServiceServicer_to_server,
        servicer,
    )
    if completion is not None:
        servicer.parcels_completing = functools.partial(sweeps.wake, RECORDER_SWEEP)
    execution = Execution(
        services=[service],
        runner=sweeps,
        stop_grace_s=settings.stop_grace_s,
        cleanups=cleanups,
        rounds=rounds,
        completion=completion,
        servicer=servicer,
        settings=settings,
    )
    if start_sweeps:
        await execution.start()
    return execution
