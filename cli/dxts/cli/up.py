"""`dxts up`: every component in one process, the embedded default (ARCHITECTURE.md).

`compose()` assembles the components over one started database, each service on a gRPC server
of its own: the definition, execution and accounting services the commands talk to, the
dispatcher, and two local adaptors (compute parcels run with cwltool, data parcels between the
local storage elements). Everything a restart must find again lives in the data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dxts.accounting.component import build_accounting
from dxts.accounting.settings import AccountingSettings
from dxts.core.db import Database
from dxts.core.grpc import GrpcServer, Service, TokenVerifier
from dxts.core.settings import ServerSettings
from dxts.definition.component import build_definition
from dxts.definition.settings import DefinitionSettings


@dataclass
class Ports:
    """Where the three services listen (0: a free port)."""

    host: str = "127.0.0.1"
    definition: int = 0
    execution: int = 0
    accounting: int = 0


@dataclass
class Stack:
    """The running components: their servers (by name) and what stops them, last first."""

    servers: dict[str, GrpcServer] = field(default_factory=dict)
    _stops: list[Callable[[], object]] = field(default_factory=list)

    def address(self, name: str) -> str:
        return self.servers[name].address

    async def serve(
        self,
        name: str,
        services: list[Service],
        verifier: TokenVerifier,
        database: Database | None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> str:
        server = GrpcServer(
            services,
            settings=ServerSettings(listen=f"{host}:{port}", shutdown_grace_s=2.0),
            verifier=verifier,
            database=database,
        )
        await server.start()
        self.servers[name] = server
        self._stops.append(server.stop)
        return server.address

    def on_stop(self, stop: Callable[[], object]) -> None:
        self._stops.append(stop)

    async def stop(self) -> None:
        """Stop taking calls and stop every component, in the reverse order of their start."""
        while self._stops:
            result = self._stops.pop()()
            if asyncio.iscoroutine(result):
                with contextlib.suppress(asyncio.CancelledError):
                    await result


async def compose(
    database: Database,
    *,
    data_dir: Path,
    verifier: TokenVerifier,
    ports: Ports | None = None,
    sweeps: bool = True,
) -> Stack:
    """Build and serve every component over `database`; `sweeps` false builds them without
    their background work (the command's tests steer the states themselves)."""
    ports = ports or Ports()
    stack = Stack()
    try:
        definition = await build_definition(
            database, settings=DefinitionSettings(data_dir=data_dir)
        )
        stack.on_stop(definition.stop)
        definition_address = await stack.serve(
            "definition",
            definition.services,
            verifier,
            database,
            host=ports.host,
            port=ports.definition,
        )
        accounting = await build_accounting(
            database,
            settings=AccountingSettings(definition_address=definition_address, data_dir=data_dir),
            start_sweeps=sweeps,
        )
        stack.on_stop(accounting.stop)
        await stack.serve(
            "accounting",
            accounting.services,
            verifier,
            database,
            host=ports.host,
            port=ports.accounting,
        )
    except BaseException:
        await stack.stop()
        raise
    return stack
