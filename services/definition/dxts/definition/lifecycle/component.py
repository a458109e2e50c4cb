"""The lifecycle engine assembled: peers, plugin providers, the sweep task.

    lifecycle = await build_lifecycle(database, settings=LifecycleSettings(),
                                      execution_address=..., data_dir=...)
    task = lifecycle.start()
    ...
    await lifecycle.close()

The engine's registry provides what the built-in hooks and actions ask for by annotation:
`Counts`, `ExecutionView`, `ExecutionControl` (the peers below), `Siblings` (a workgraph's
members, read here), `FileCatalogue` (the configured
catalogue, opened on first use) and the `Registry` itself (ReconcileFeederInputs re-runs
feeders). Tests pass doubles for the peers and a registry of their own plugins.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dxts.core.catalogue import FileCatalogue, open_catalogue
from dxts.core.db import Database
from dxts.core.grpc import DevKeys, channel
from dxts.core.locks import LockManager
from dxts.core.plugins import PluginRegistryError, Providers
from dxts.core.plugins.points import Point
from dxts.core.plugins.protocols.lifecycle import Counts, ExecutionControl, ExecutionView, Siblings
from dxts.core.plugins.registry import Registry
from dxts.definition.lifecycle.clients import (
    DefinitionSiblings,
    GrpcCounts,
    GrpcExecution,
    NoCounts,
    NoExecution,
)
from dxts.definition.lifecycle.engine import Engine
from dxts.definition.lifecycle.settings import LifecycleSettings
from dxts.definition.lifecycle.sweep import LifecycleSweep
from dxts.definition.lifecycle.views import AUTHOR

DEV_TOKEN_LIFETIME = timedelta(days=365)


@dataclass
class Lifecycle:
    engine: Engine
    sweep: LifecycleSweep
    _cleanups: list[Callable[[], object]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.create_task(self.sweep.run_forever(), name="definition-lifecycle")
        return self._task

    async def close(self) -> None:
        """Stop the sweep at its next pause (a sweep in progress is cancelled) and release what
        was opened for it; idempotent."""
        self.sweep.stopping.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._cleanups:
            result = self._cleanups.pop()()
            if asyncio.iscoroutine(result):
                await result


LIFECYCLE_POINTS = frozenset(
    {
        Point.SCOUTING_TO_APPROVING,
        Point.WORKGRAPH_ACTIVE,
        Point.TRANSFORMATION_ACTIVE,
        Point.APPROVING,
        Point.FINALIZING,
        Point.ARCHIVING,
        Point.CLEANING,
    }
)
# Declared optional by the built-ins (so that other processes' start-up checks pass them) but
# needed here.
SERVICES = (Counts, ExecutionView, ExecutionControl, Siblings, Registry)


def check_lifecycle_plugins(registry: Registry) -> None:
    """What `Registry.check` proves, for the plugins this engine runs: every parameter they
    are injected with has a provider here (settings classes read now). Feeders and packers run
    in execution and are checked there."""
    problems = []
    for plugin in registry:
        if not plugin.points & LIFECYCLE_POINTS:
            continue
        for injection in plugin.injections:
            annotation = injection.annotation
            name = getattr(annotation, "__qualname__", repr(annotation))
            wanted = not injection.optional or annotation in SERVICES
            if wanted and not registry.providers.can_provide(annotation):
                problems.append(
                    f"{plugin.label} ({plugin.provider}): parameter {injection.parameter!r} is "
                    f"annotated {name}, which the definition service does not provide"
                )
                continue
            try:
                registry.providers.prepare(annotation)
            except (ValidationError, ValueError) as error:
                problems.append(f"{plugin.label}: {name} is invalid: {error}")
    if problems:
        raise PluginRegistryError(problems)


def _provide(providers: Providers, annotation: Any, value: Any) -> None:
    if not providers.can_provide(annotation):
        providers.add(annotation, value)


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
) -> Lifecycle:
    """The engine over a started `database`. `counts` defaults to accounting at
    `settings.accounting_address`, `execution` (an ExecutionView and ExecutionControl) to
    execution at `execution_address`, each answering UNAVAILABLE when not configured; `registry`
    to the installed plugins."""
    cleanups: list[Callable[[], object]] = []
    token = settings.token()
    if token is None and data_dir is not None:
        token = DevKeys.load_or_create(data_dir).issue(
            "dxts", AUTHOR, ("service",), lifetime=DEV_TOKEN_LIFETIME
        )
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
    _provide(providers, Siblings, DefinitionSiblings(database))
    _provide(providers, Registry, registry)
    if catalogue is not None:
        _provide(providers, FileCatalogue, catalogue)
    elif not providers.can_provide(FileCatalogue):

        async def open_configured() -> FileCatalogue:
            opened = await open_catalogue()
            cleanups.append(opened.close)
            return opened

        providers.add_factory(FileCatalogue, open_configured)  # type: ignore[type-abstract]
    check_lifecycle_plugins(registry)
    if locks is None:
        locks = LockManager(database)
        cleanups.append(locks.dispose)
    engine = Engine(database, registry, counts, execution, settings)
    return Lifecycle(engine, LifecycleSweep(engine, locks), cleanups)
