"""The one shell every dxts server runs in: a `Component` with `start`/`stop`, and `serve`.

A component is what a server is made of once assembled: the gRPC services it offers, the
sweep runner that runs its periodic rounds, what must happen when it starts, and what it must
release when it stops. The services (definition, execution, accounting), the dispatcher, the
backend adaptors and the web view are each one; `dxts up` composes several in one process and
one event loop, and each console script serves one alone through `serve`:

    def main() -> None:
        serve("accounting service", AccountingSettings, build)

`serve` does, once for every server, what a process does around its component: logging to
stderr, the database and the file catalogue opened when the component asks for them (and closed
after it stops), the gRPC server with health, reflection, authentication and the Prometheus
endpoint (when DXTS_METRICS_PORT is set), and a graceful stop on SIGTERM or SIGINT — caught from
the first moment, so a signal that arrives while the component starts still stops it cleanly:
health turns NOT_SERVING, in-flight calls get DXTS_SHUTDOWN_GRACE_S, then the component stops
(its running rounds get its `stop_grace_s`, then are cancelled and roll back). A configuration
or start-up error is one line and exit status 1, not a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from dxts.core.catalogue import CatalogueSettings, FileCatalogue, open_catalogue
from dxts.core.db import Database, open_database
from dxts.core.grpc import Service, TokenVerifier
from dxts.core.grpc.diracx_issuer import authenticator
from dxts.core.grpc.process import run_process, serve_component
from dxts.core.kernel.sweeps import SweepRunner
from dxts.core.settings import AuthSettings, DatabaseSettings, DataDirSettings, ServerSettings

S = TypeVar("S")

# How long a round still running when a component stops may take to finish: rounds are short
# (one batch, one transaction), and one cancelled rolls back and is done by the next start.
STOP_GRACE_S = 5.0
SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(kw_only=True)
class Component:
    """A server's parts: `services` to serve, the `runner` of its sweeps (None: it sweeps
    nothing), the steps `on_start` runs before the sweeps start, and the `cleanups` `stop` runs,
    last added first. `stop` is idempotent and releases what the component opened, never what
    it was given (the database, a shared catalogue)."""

    services: list[Service] = field(default_factory=list)
    runner: SweepRunner | None = None
    stop_grace_s: float = STOP_GRACE_S
    on_start: list[Callable[[], Awaitable[object]]] = field(default_factory=list)
    cleanups: list[Callable[[], object]] = field(default_factory=list)

    async def start(self) -> None:
        """Run the start steps, then the sweeps, on the running loop."""
        for step in self.on_start:
            await step()
        if self.runner is not None and not self.runner.running:
            self.runner.start()

    async def stop(self) -> None:
        """Stop the sweeps (a round in progress gets `stop_grace_s`, then is cancelled and rolls
        back), then run the cleanups."""
        if self.runner is not None:
            await self.runner.stop(grace_s=self.stop_grace_s)
        while self.cleanups:
            result = self.cleanups.pop()()
            if asyncio.iscoroutine(result):
                await result


class Process:
    """What the shell opens for a component on its first ask, and closes after it stops."""

    def __init__(self, stack: contextlib.AsyncExitStack) -> None:
        self._stack = stack
        self.opened_database: Database | None = None
        self._catalogue: FileCatalogue | None = None

    async def database(self) -> Database:
        """The database of DXTS_DB_URL (and the other DXTS_DB_* settings), started."""
        if self.opened_database is None:
            settings = DatabaseSettings()
            self.opened_database = await open_database(settings.url, settings)
            self._stack.push_async_callback(self.opened_database.dispose)
        return self.opened_database

    async def catalogue(self) -> FileCatalogue:
        """The file catalogue DXTS_CATALOGUE_* configures, started."""
        if self._catalogue is None:
            self._catalogue = await open_catalogue(CatalogueSettings())
            self._stack.push_async_callback(self._catalogue.close)
        return self._catalogue


Build = Callable[[S, Process], Awaitable[Component]]


def settle_heap() -> None:
    """Once a server has started, put every object then alive (modules, settings, compiled
    statements, channels, caches) beyond the cyclic garbage collector's scans (`gc.freeze`):
    a full collection then walks only what requests allocate. Without it, full collections over
    the start-up heap of `dxts up` (every component in one process) added about 120 ms to one
    request in three of the web bench's list page; the objects frozen live as long as the
    process anyway."""
    gc.collect()
    gc.freeze()


def serve(what: str, settings: Callable[[], S], build: Build[S]) -> None:
    """The body of every server's `main()`: read `settings()`, `build` the component from them
    and serve it until SIGTERM or SIGINT (see the module docstring). `what` names the server in
    the one-line start-up error."""
    log = logging.getLogger(build.__module__.removesuffix(".__main__"))

    async def main() -> None:
        await serve_until_signalled(settings, build, log)

    run_process(what, main, log)


async def serve_until_signalled(
    settings: Callable[[], S], build: Build[S], log: logging.Logger
) -> None:
    """`serve` on the running loop: start, serve until a signal, stop in reverse order."""
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()
    for number in SIGNALS:
        loop.add_signal_handler(number, signalled.set)
    try:
        configured = settings()
        async with contextlib.AsyncExitStack() as stack:
            process = Process(stack)
            component = await build(configured, process)
            stack.push_async_callback(component.stop)
            await component.start()
            if component.services:
                await serve_component(
                    stack,
                    component.services,
                    settings=ServerSettings(),
                    verifier=authenticator(
                        TokenVerifier.from_settings(
                            AuthSettings(), dev_key_dir=DataDirSettings().data_dir
                        )
                    ),
                    database=process.opened_database,
                    log=log,
                )
            settle_heap()
            await signalled.wait()
            log.info("signal received: stopping")
    finally:
        for number in SIGNALS:
            loop.remove_signal_handler(number)
