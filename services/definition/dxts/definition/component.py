"""The definition component assembled: its gRPC service, ready to be served.

`dxts-definition` (`__main__`) serves it alone; `dxts up` composes it with the other
components in one process and one event loop:

    definition = await build_definition(database, settings=DefinitionSettings())
    server = GrpcServer([*definition.services, ...], settings=..., verifier=...)
    ...
    await definition.stop()

With `lifecycle` settings the lifecycle engine's sweep (`dxts.definition.lifecycle`) runs
as one of `tasks`; without them (tests of the service alone) nothing sweeps.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from dxts.core.config import DefinitionConfig
from dxts.core.db import Database
from dxts.core.grpc import Service, channel
from dxts.core.locks import LockManager
from dxts.core.plugins.registry import Registry
from dxts.cwl.plugins import PluginCatalogue
from dxts.definition.execution_client import (
    ExecutionClient,
    ExecutionFactory,
    GrpcExecutionClient,
    NoExecutionClient,
)
from dxts.definition.lifecycle.component import build_lifecycle
from dxts.definition.lifecycle.settings import LifecycleSettings
from dxts.definition.servicer import DefinitionServicer
from dxts.definition.settings import DefinitionSettings
from dxts.v1 import definition_pb2, definition_pb2_grpc


@dataclass
class Definition:
    """A built definition component: `services` to serve, `tasks` running its sweeps."""

    services: list[Service]
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _cleanups: list[Callable[[], object]] = field(default_factory=list)

    async def stop(self) -> None:
        """Cancel the sweeps and release what the component opened (not the database)."""
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for cleanup in reversed(self._cleanups):
            result = cleanup()
            if asyncio.iscoroutine(result):
                await result


async def build_definition(
    database: Database,
    *,
    settings: DefinitionSettings | None = None,
    catalogue: PluginCatalogue | None = None,
    config: DefinitionConfig | None = None,
    execution: ExecutionFactory | None = None,
    lifecycle: LifecycleSettings | None = None,
) -> Definition:
    """The definition service over a started `database`.

    `catalogue` defaults to the installed plugins (entry points), `config` to the installation
    file of `settings.config_file`, and `execution` to the execution service at
    `settings.execution_address` (each call carrying its caller's token), or to a client
    answering UNAVAILABLE when none is configured.
    """
    settings = settings or DefinitionSettings()
    cleanups: list[Callable[[], object]] = []
    if execution is None:
        if settings.execution_address:
            forward: grpc.aio.Channel = channel(settings.execution_address)
            cleanups.append(forward.close)

            def execution(token: str | None) -> ExecutionClient:
                return GrpcExecutionClient(forward, token)
        else:
            refuse = NoExecutionClient()

            def execution(token: str | None) -> ExecutionClient:
                return refuse

    registry = catalogue if catalogue is not None else Registry.discover()
    tasks: list[asyncio.Task[None]] = []
    if lifecycle is not None:
        engine = await build_lifecycle(
            database,
            settings=lifecycle,
            execution_address=settings.execution_address,
            data_dir=settings.data_dir,
            registry=registry if isinstance(registry, Registry) else None,
        )
        tasks.append(engine.start())
        cleanups.append(engine.close)
    # Serialises repeated SubmitWorkgraph request ids (submit.py); pools no connection.
    locks = LockManager(database)
    cleanups.append(locks.dispose)
    servicer = DefinitionServicer(
        database,
        settings=settings,
        catalogue=registry,
        config=config or settings.definition_config(),
        execution=execution,
        locks=locks,
    )
    service = Service.of(
        definition_pb2.DESCRIPTOR.services_by_name["DefinitionService"],
        definition_pb2_grpc.add_DefinitionServiceServicer_to_server,
        servicer,
    )
    return Definition([service], tasks, cleanups)
