"""The definition component assembled: its gRPC service, ready to be served.

`dxts-definition` (`__main__`) serves it alone; `dxts up` composes it with the other
components in one process and one event loop:

    definition = await build_definition(database, settings=DefinitionSettings())
    server = GrpcServer([*definition.services, ...], settings=..., verifier=...)
    ...
    await definition.stop()

With `lifecycle` settings the lifecycle engine's sweep (`dxts.definition.logic.lifecycle`)
runs on the kernel's sweep runner; without them (tests of the service alone) nothing sweeps.
`dxts up` and the tests also build the engine alone:

    lifecycle = await build_lifecycle(database, settings=LifecycleSettings(),
                                      execution_address=..., data_dir=...)
    await lifecycle.start()
    ...
    await lifecycle.stop()

Both are `dxts.core.component.Component`s: `start` runs the sweep, `stop` ends it.

The engine's registry provides what the built-in hooks and actions ask for by annotation: `Counts`,
`ExecutionView`, `ExecutionControl`, `FinalParcels` (the peers, over gRPC: `edge`), `Siblings` (a
workgraph's members, read here), `FileCatalogue` (the configured catalogue, opened on first use),
the `Registry` itself and an `InputOverviewReader` over `Counts` (ReconcileFeederInputs re-runs
feeders, which are injected what execution's registry gives them: the standalone process shares no
registry with execution). Tests pass doubles for the peers and a registry of their own plugins.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from dxts.core.catalogue import FileCatalogue, ScopedCatalogue, open_catalogue
from dxts.core.component import Component
from dxts.core.config import DefinitionConfig, load_installation_config
from dxts.core.db import Database
from dxts.core.grpc import Service, channel
from dxts.core.kernel.authorisation import CallerKind
from dxts.core.kernel.sweeps import Pacing, Sweep, SweepRunner
from dxts.core.locks import LockManager
from dxts.core.plugins import Providers
from dxts.core.plugins.protocols.lifecycle import (
    Counts,
    ExecutionControl,
    ExecutionView,
    FinalParcels,
    Siblings,
)
from dxts.core.plugins.protocols.readers import InputOverviewReader
from dxts.core.plugins.registry import Registry
from dxts.core.policy import Policy
from dxts.cwl.plugins import PluginCatalogue
from dxts.definition.edge.accounting_client import GrpcCounts, NoCounts
from dxts.definition.edge.execution_client import (
    GrpcExecution,
    GrpcExecutionClient,
    NoExecution,
    NoExecutionClient,
)
from dxts.definition.edge.servicer import DefinitionServicer
from dxts.definition.logic.attention_metrics import AttentionGauges
from dxts.definition.logic.execution import ExecutionClient, ExecutionFactory
from dxts.definition.logic.lifecycle.engine import Engine
from dxts.definition.logic.lifecycle.overview import CountsOverview
from dxts.definition.logic.lifecycle.plugin_check import check_lifecycle_plugins
from dxts.definition.logic.lifecycle.sweep import LifecycleSweep
from dxts.definition.logic.lifecycle.views import AUTHOR, DefinitionSiblings
from dxts.definition.settings import DefinitionSettings, LifecycleSettings
from dxts.v1 import definition_pb2, definition_pb2_grpc


@dataclass(kw_only=True)
class Lifecycle(Component):
    """The lifecycle engine and its sweep, run by `start` on the kernel's runner (a round
    still running at `stop` gets the engine's `stop_grace_s`, then is cancelled)."""

    engine: Engine
    sweep: LifecycleSweep


def lifecycle_of(
    engine: Engine, sweep: LifecycleSweep, cleanups: list[Callable[[], object]]
) -> Lifecycle:
    pacing = Pacing(engine.settings.interval_s)
    runner = SweepRunner([Sweep("lifecycle", sweep.sweep_once, pacing, pending=sweep.pending)])
    return Lifecycle(
        engine=engine,
        sweep=sweep,
        runner=runner,
        stop_grace_s=engine.settings.stop_grace_s,
        cleanups=cleanups,
    )


def _provide(providers: Providers, annotation: Any, value: Any) -> None:
    if not providers.can_provide(annotation):
        providers.add(annotation, value)


def service_token(settings: LifecycleSettings, data_dir: Path | None) -> str | None:
    """Definition's own token (kind `service`), as `ServiceTokenSettings.own_token` finds it."""
    return settings.own_token(AUTHOR, CallerKind.SERVICE, data_dir)


async def build_lifecycle(
    database: Database,
    *,
    settings: LifecycleSettings,
    execution_address: str | None = None,
    data_dir: Path | None = None,
    registry: Registry | None = None,
    counts: Counts | None = None,
    execution: Any = None,
    catalogue: FileCatalogue | None = None,
    locks: LockManager | None = None,
    policy: Policy | None = None,
) -> Lifecycle:
    """The engine over a started `database`. `counts` defaults to accounting at
    `settings.accounting_address`, `execution` (an ExecutionView and ExecutionControl) to
    execution at `execution_address`, each answering UNAVAILABLE when not configured; `registry`
    to the installed plugins; `policy` to the installation file's (`DXTS_CONFIG_FILE`)."""
    cleanups: list[Callable[[], object]] = []
    token = service_token(settings, data_dir)
    if counts is None:
        if settings.accounting_address:
            accounting = channel(settings.accounting_address, token=token)
            cleanups.append(accounting.close)
            counts = GrpcCounts(accounting)
        else:
            counts = NoCounts()
    if execution is None:
        if execution_address:
            forward = channel(execution_address, token=token)
            cleanups.append(forward.close)
            execution = GrpcExecution(forward, database)
        else:
            execution = NoExecution()
    registry = registry if registry is not None else Registry.discover(providers=Providers())
    providers = registry.providers
    _provide(providers, Counts, counts)
    _provide(providers, ExecutionView, execution)
    _provide(providers, ExecutionControl, execution)
    _provide(providers, FinalParcels, execution)
    _provide(providers, Siblings, DefinitionSiblings(database))
    _provide(providers, InputOverviewReader, CountsOverview(counts))
    _provide(providers, Registry, registry)
    # Plugins see the catalogue through the scope of the work they do (`files_of`): the one
    # provider serves execution's feeders too when both run in one process (`dxts up`).
    if catalogue is not None:
        _provide(providers, FileCatalogue, ScopedCatalogue(catalogue))
    elif not providers.can_provide(FileCatalogue):

        async def open_configured() -> FileCatalogue:
            opened = await open_catalogue()
            cleanups.append(opened.close)
            return ScopedCatalogue(opened)

        providers.add_factory(FileCatalogue, open_configured)  # type: ignore[type-abstract]
    check_lifecycle_plugins(registry)
    if locks is None:
        locks = LockManager(database)
        cleanups.append(locks.dispose)
    if policy is None:
        policy = load_installation_config().definition.policy
    engine = Engine(database, registry, counts, execution, settings, policy)
    return lifecycle_of(engine, LifecycleSweep(engine, locks), cleanups)


def _attention_gauges(database: Database, settings: DefinitionSettings) -> SweepRunner:
    """The sweep measuring the attention gauges, beside the lifecycle engine (one per
    installation's definition service)."""
    gauges = AttentionGauges(database, settings.attention_rules())
    interval = settings.attention_metrics_interval_s
    pacing = Pacing(interval, first_idle_s=interval)
    return SweepRunner([Sweep("attention-metrics", gauges.measure, pacing)])


class Definition(Component):
    """A built definition component: its service, and the lifecycle engine's sweep when built
    with one (started and stopped with it)."""


async def build_definition(
    database: Database,
    *,
    settings: DefinitionSettings | None = None,
    catalogue: PluginCatalogue | None = None,
    config: DefinitionConfig | None = None,
    execution: ExecutionFactory | None = None,
    lifecycle: LifecycleSettings | None = None,
    start_sweeps: bool = True,
) -> Definition:
    """The definition service over a started `database`.

    `catalogue` defaults to the installed plugins (entry points), `config` to the installation
    file of `settings.config_file`, and `execution` to the execution service at
    `settings.execution_address` (each call carrying its caller's token; a user job's parcel is
    created with definition's own service token, `DXTS_SERVICE_TOKEN`), or to a client
    answering UNAVAILABLE when none is configured. With `start_sweeps` false the lifecycle
    engine starts with the component's `start`.
    """
    settings = settings or DefinitionSettings()
    cleanups: list[Callable[[], object]] = []
    on_start: list[Callable[[], Awaitable[object]]] = []
    if execution is None:
        if settings.execution_address:
            forward: grpc.aio.Channel = channel(settings.execution_address)
            cleanups.append(forward.close)
            own = service_token(lifecycle or LifecycleSettings(), settings.data_dir)

            def execution(token: str | None) -> ExecutionClient:
                return GrpcExecutionClient(forward, token, service_token=own)
        else:
            refuse = NoExecutionClient()

            def execution(token: str | None) -> ExecutionClient:
                return refuse

    registry = catalogue if catalogue is not None else Registry.discover()
    config = config or settings.definition_config()
    if lifecycle is not None:
        engine = await build_lifecycle(
            database,
            settings=lifecycle,
            execution_address=settings.execution_address,
            data_dir=settings.data_dir,
            registry=registry if isinstance(registry, Registry) else None,
            policy=config.policy,
        )
        on_start.append(engine.start)
        cleanups.append(engine.stop)
    # Serialises repeated SubmitWorkgraph request ids (submit.py); pools no connection.
    locks = LockManager(database)
    cleanups.append(locks.dispose)
    servicer = DefinitionServicer(
        database,
        settings=settings,
        catalogue=registry,
        config=config,
        execution=execution,
        locks=locks,
    )
    service = Service.of(
        definition_pb2.DESCRIPTOR.services_by_name["DefinitionService"],
        definition_pb2_grpc.add_DefinitionServiceServicer_to_server,
        servicer,
    )
    definition = Definition(
        services=[service],
        runner=_attention_gauges(database, settings) if lifecycle is not None else None,
        on_start=on_start,
        cleanups=cleanups,
    )
    if start_sweeps:
        await definition.start()
    return definition
