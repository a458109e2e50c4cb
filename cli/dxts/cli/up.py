"""`dxts up`: every component in one process, the embedded default (docs/architecture.md).

`compose()` assembles the components over one started database, each service on a gRPC server
of its own: the definition, execution and accounting services the commands talk to, the
dispatcher, and two adaptors, found by entry point (`dxts.backends.plugins`): compute parcels
run with cwltool on this machine (the local adaptor) or, with `--backend slurm`, as jobs of the
Slurm cluster SLURM_CONF names (the Slurm adaptor; `scripts/slurm start` runs one here), or on
any other adaptor installed; data parcels run between the local storage elements (the local
adaptor). Everything a restart must find again lives in the data directory:

    dxts.sqlite            the database (unless --db-url names another)
    catalogue.sqlite       the local file catalogue
    storage/<SE>/<LFN>     the local storage elements' files
    local/ (slurm/), local-data/  the adaptors' own state and one directory per parcel (its
                           sandbox; slurm/ must be on storage the cluster's nodes share)
    dev-only-jwt-*.pem     the development token key pair
    connection.json        the addresses, web URL and token the `dxts` commands read (while it runs)
    web-port               the web view's port, served on again at the next start (--web-port)
    up.log                 the components' log

All of it is the user's alone: `dxts up` sets its umask to 077 and closes the directory (0700),
so every directory it makes is 0700 and every file (databases, keys, tokens) 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import getpass
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import sqlalchemy as sa
import typer

from dxts.accounting.component import build_accounting
from dxts.accounting.settings import AccountingSettings
from dxts.backends import plugins
from dxts.backends.edge.servicer import adaptor_service
from dxts.backends.logic.adaptor import Adaptor
from dxts.cli.connection import (
    CONNECTION_FILE,
    CURRENT_FILE,
    ENVIRONMENT,
    Connection,
    data_dir,
    forget_current,
    record_current,
)
from dxts.core.catalogue import CatalogueSettings, FileCatalogue, open_catalogue
from dxts.core.component import settle_heap
from dxts.core.db import Database
from dxts.core.errors import DxtsError, Unavailable
from dxts.core.grpc import DevKeys, GrpcServer, Service, TokenVerifier
from dxts.core.grpc.auth import Authenticator
from dxts.core.grpc.diracx_issuer import authenticator
from dxts.core.grpc.ports import free_port
from dxts.core.locks import LockManager
from dxts.core.migrations import upgrade
from dxts.core.plugins import Providers, Registry
from dxts.core.settings import (
    AuthSettings,
    DatabaseSettings,
    ServerSettings,
    async_database_url,
)
from dxts.core.states import Kind
from dxts.definition.component import build_definition, build_lifecycle
from dxts.definition.settings import DefinitionSettings, LifecycleSettings
from dxts.dispatcher.component import build_dispatcher
from dxts.dispatcher.settings import BackendConfig, DispatcherSettings
from dxts.execution.component import build_execution
from dxts.execution.settings import ExecutionSettings
from dxts.web.server import WebServer
from dxts.web.settings import WebSettings

# The local storage elements: compute outputs are written to the first; the example workgraph
# replicates its merged datasets to the second.
STORAGE_ELEMENTS = ("LOCAL-DISK", "LOCAL-ARCHIVE")
TOKEN_LIFETIME = timedelta(days=30)
# How long the sign-in link `dxts up` prints stays valid (it works once).
SIGN_IN_LINK_S = 24 * 3600
# The sweeps' pause on the embedded default: a laptop run of a few dozen parcels moves on within
# a second, where the production defaults are tuned for millions of rows.
PACE_S = 1.0
LOCK_FILE = "up.lock"
LOG_FILE = "up.log"


@dataclass
class Ports:
    """Where the three services listen (0: a free port)."""

    host: str = "127.0.0.1"
    definition: int = 0
    execution: int = 0
    accounting: int = 0
    web: int = 0


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
        verifier: Authenticator,
        database: Database | None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> str:
        listen = f"{host}:{port}"
        server = GrpcServer(
            services,
            settings=ServerSettings(listen=listen, shutdown_grace_s=2.0),
            verifier=verifier,
            database=database,
            # grpc shares a port another process listens on unless told not to: a port taken
            # by another `dxts up` must be an error, not a second server answering on it.
            options=[("grpc.so_reuseport", 0)],
        )
        try:
            await server.start()
        except RuntimeError as error:
            raise Unavailable(f"cannot serve {name} on {listen}: {error}") from None
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
                await result


async def _serve_adaptor(
    stack: Stack, name: str, adaptor: Adaptor, verifier: Authenticator, host: str
) -> str:
    await adaptor.start()
    stack.on_stop(adaptor.stop)
    return await stack.serve(name, [adaptor_service(adaptor)], verifier, None, host=host)


async def compose(
    database: Database,
    *,
    data_dir: Path,
    verifier: Authenticator,
    catalogue: FileCatalogue,
    ports: Ports | None = None,
    workers: int = 2,
    sweeps: bool = True,
    backend: str = "local",
    backend_url: str | None = None,
    catalogue_url: str | None = None,
) -> Stack:
    """Build and serve every component over `database` and `catalogue` (both started); with
    `sweeps` false they are built without their background work (the command's tests steer
    the states themselves). Compute parcels go to an adaptor of type `backend`, found by entry
    point (`dxts.backends.plugins`; `backend_url` names the system it drives, if any), data
    parcels to the local adaptor."""
    ports = ports or Ports()
    host = ports.host
    port = {
        name: chosen or free_port(host)
        for name, chosen in (
            ("definition", ports.definition),
            ("execution", ports.execution),
            ("accounting", ports.accounting),
        )
    }
    address = {name: f"{host}:{number}" for name, number in port.items()}
    stack = Stack()
    try:
        site = plugins.Site(
            data_dir=data_dir,
            catalogue=catalogue,
            storage_root=data_dir / "storage",
            storage_elements=STORAGE_ELEMENTS,
            workers=workers,
            catalogue_url=catalogue_url,
            url=backend_url,
        )
        backends = []
        created: dict[str, Adaptor] = {}  # backend name → its adaptor
        for adaptor_type, kind in ((backend, Kind.COMPUTE), ("local", Kind.DATA)):
            try:
                made = plugins.create(adaptor_type, site, kind)
            except (KeyError, ValueError) as error:
                raise DxtsError(f"--backend {adaptor_type}: {error}") from None
            created[made.name] = made.adaptor
            served = await _serve_adaptor(stack, made.name, made.adaptor, verifier, host)
            backends.append(
                BackendConfig(name=made.name, address=served, kind=kind, adaptor=adaptor_type)
            )
        locks = LockManager(database)
        stack.on_stop(locks.dispose)

        definition = await build_definition(
            database,
            settings=DefinitionSettings(data_dir=data_dir, execution_address=address["execution"]),
        )
        stack.on_stop(definition.stop)
        await stack.serve(
            "definition",
            definition.services,
            verifier,
            database,
            host=host,
            port=port["definition"],
        )

        accounting = await build_accounting(
            database,
            settings=AccountingSettings(
                definition_address=address["definition"], data_dir=data_dir
            ),
            locks=locks,
            start_sweeps=sweeps,
        )
        stack.on_stop(accounting.stop)
        await stack.serve(
            "accounting",
            accounting.services,
            verifier,
            database,
            host=host,
            port=port["accounting"],
        )

        # One registry for the plugins run here: the lifecycle's hooks and actions and
        # execution's feeders and packers, each side providing what its plugins are injected.
        registry = Registry.discover(providers=Providers())
        lifecycle = await build_lifecycle(
            database,
            settings=LifecycleSettings(accounting_address=address["accounting"], interval_s=PACE_S),
            execution_address=address["execution"],
            data_dir=data_dir,
            registry=registry,
            catalogue=catalogue,
            locks=locks,
        )
        stack.on_stop(lifecycle.stop)
        execution = await build_execution(
            database,
            settings=ExecutionSettings(
                definition_address=address["definition"],
                data_dir=data_dir,
                feed_interval_s=PACE_S,
                pack_interval_s=PACE_S,
                record_interval_s=PACE_S / 2,
                failed_inputs_interval_s=PACE_S,
            ),
            registry=registry,
            catalogue=catalogue,
            locks=locks,
            start_sweeps=sweeps,
        )
        stack.on_stop(execution.stop)
        await stack.serve(
            "execution", execution.services, verifier, database, host=host, port=port["execution"]
        )
        if sweeps:
            await lifecycle.start()

        dispatcher = await build_dispatcher(
            database,
            settings=DispatcherSettings(
                backends=backends,
                definition_address=address["definition"],
                execution_address=address["execution"],
                data_dir=data_dir,
                idle_s=PACE_S / 2,
                poll_interval_s=PACE_S,
                cancel_interval_s=PACE_S,
                recovery_interval_s=10 * PACE_S,
            ),
            start_sweeps=sweeps,
        )
        stack.on_stop(dispatcher.stop)
        await stack.serve("dispatcher", dispatcher.services, verifier, database, host=host)
        # In one process the components tell each other when work is ready, so a job does not
        # wait out the sweeps' idle intervals (submit → claim, end → poll).
        execution.servicer.parcels_unassigned = dispatcher.wake_claims
        for name, adaptor in created.items():
            if hasattr(adaptor, "finished"):  # an adaptor that says when work ends
                adaptor.finished = functools.partial(dispatcher.wake_poll, name)
    except BaseException:
        await stack.stop()
        raise
    return stack


# -- the command --------------------------------------------------------------------------------


@contextlib.contextmanager
def _only_one(directory: Path) -> Iterator[None]:
    """One `dxts up` per data directory: two would share the SQLite file and the adaptors'
    state, which is for one process only."""
    with (directory / LOCK_FILE).open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise DxtsError(
                f"{directory} is already used by a running `dxts up` (pid {holder})"
            ) from None
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            handle.truncate(0)


class _OneLine(logging.Formatter):
    """The terminal gets one line per record; the tracebacks are in the log file."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{self.formatTime(record)} {record.levelname} {record.name}: {record.getMessage()}"


def _log_to(path: Path, verbose: bool) -> None:
    """Every component's log into `path`; errors (and everything, with --verbose) on stderr
    too, one line each."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    to_file = logging.FileHandler(path)
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    to_terminal = logging.StreamHandler(sys.stderr)
    to_terminal.setFormatter(_OneLine())
    to_terminal.setLevel(logging.INFO if verbose else logging.ERROR)
    root.addHandler(to_file)
    root.addHandler(to_terminal)


def _say(text: str) -> None:
    typer.echo(text, err=True)


async def _run(
    directory: Path,
    url: str,
    ports: Ports,
    vo: str,
    workers: int,
    backend: str,
    backend_url: str | None,
) -> None:
    _say(f"dxts up: data directory {directory}")
    keys = DevKeys.load_or_create(directory)
    _say(
        f"WARNING: development only. Tokens are signed with the key pair {keys.path}: anyone who "
        "can read it can act as any user. Run dxts this way on a single machine only."
    )
    revisions = await upgrade(url)
    _say(
        f"database {sa.make_url(url).render_as_string(hide_password=True)}: {revisions.describe()}"
    )
    verifier = authenticator(TokenVerifier.from_settings(AuthSettings(), dev_key_dir=directory))
    catalogue_settings = CatalogueSettings()
    if not os.environ.get("DXTS_CATALOGUE_URL"):
        catalogue_settings.url = f"sqlite+aiosqlite:///{directory / 'catalogue.sqlite'}"
    local_catalogue = (
        catalogue_settings.url if catalogue_settings.implementation == "local" else None
    )
    async with contextlib.AsyncExitStack() as exit_stack:
        database = Database(url, DatabaseSettings(url=url))
        await database.start()
        exit_stack.push_async_callback(database.dispose)
        catalogue = await open_catalogue(catalogue_settings)
        exit_stack.push_async_callback(catalogue.close)
        stack = await compose(
            database,
            data_dir=directory,
            verifier=verifier,
            catalogue=catalogue,
            ports=ports,
            workers=workers,
            backend=backend,
            backend_url=backend_url,
            catalogue_url=local_catalogue,
        )
        exit_stack.push_async_callback(stack.stop)
        web = await serve_web(stack, ports, directory)
        exit_stack.push_async_callback(web.stop)
        token = keys.issue(vo, getpass.getuser(), ("operator", "user"), lifetime=TOKEN_LIFETIME)
        connection = Connection(
            definition=stack.address("definition"),
            execution=stack.address("execution"),
            accounting=stack.address("accounting"),
            dispatcher=stack.address("dispatcher"),
            token=token,
            web=web.url,
            storage=str(directory / "storage"),
            storage_elements=",".join(STORAGE_ELEMENTS),
            catalogue=local_catalogue,
            storage_endpoints=os.environ.get(ENVIRONMENT["storage_endpoints"]) or None,
        )
        connection_file = directory / CONNECTION_FILE
        connection.write(connection_file)
        exit_stack.callback(connection_file.unlink, missing_ok=True)
        record_current(directory)
        exit_stack.callback(forget_current, directory)
        for name, server in stack.servers.items():
            _say(f"  {name:<12} {server.address}")
        _say(f"  {'web':<12} {web.url}")
        _say(f"storage elements under {directory / 'storage'}: {', '.join(STORAGE_ELEMENTS)}")
        link = web.sign_in_link("/workgraphs", token=token, seconds=SIGN_IN_LINK_S)
        _say(f"web view: sign in once with {link} (then `dxts open WG` for a page)")
        _say(
            f"ready: the dxts commands read {connection_file} (recorded in {CURRENT_FILE} "
            "for the commands started without --data-dir); Ctrl-C stops"
        )
        await _until_signalled()
        _say("dxts up: stopping")
    _say("dxts up: stopped")


WEB_PORT_FILE = "web-port"


def recorded_web_port(directory: Path) -> int:
    """The web view's port the last `dxts up` of this data directory served on (0: none)."""
    try:
        return int((directory / WEB_PORT_FILE).read_text().strip())
    except (OSError, ValueError):
        return 0


async def serve_web(stack: Stack, ports: Ports, directory: Path | None = None) -> WebServer:
    """The web view (dxts-web) over the composed services, on `ports.web`; without one, on the
    port recorded in the data directory (`web-port`) by the last start, so that open tabs and
    bookmarks survive a restart; else (or when that port is taken now) on a free port. The
    port served on is recorded for the next start."""
    recorded = recorded_web_port(directory) if directory is not None and not ports.web else 0

    def settings(port: int) -> WebSettings:
        return WebSettings(
            listen=f"{ports.host}:{port}",
            definition_address=stack.address("definition"),
            execution_address=stack.address("execution"),
            accounting_address=stack.address("accounting"),
            dispatcher_address=stack.address("dispatcher"),
        )

    try:
        web = WebServer(settings(ports.web or recorded))
    except OSError as error:
        if not recorded:
            raise
        _say(
            f"web view: port {recorded} (recorded in {WEB_PORT_FILE}) is taken "
            f"({error.strerror}): serving on a free port instead"
        )
        web = WebServer(settings(0))
    await web.start()
    if directory is not None:
        port = web.address.rpartition(":")[2]
        (directory / WEB_PORT_FILE).write_text(f"{port}\n")
    return web


async def _until_signalled() -> None:
    loop = asyncio.get_running_loop()
    received = asyncio.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, received.set)
    settle_heap()  # once a signal can no longer kill the process before it is handled
    try:
        await received.wait()
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)


def _private(directory: Path) -> None:
    """The data directory holds the databases, the signing key, the operator's token and the
    storage: its user's alone. Everything this process creates from here on is 0700 (a
    directory) or 0600 (a file, a database), and a directory made before is closed too."""
    os.umask(0o077)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    directory.chmod(0o700)


def up(
    data_dir_option: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Where everything is kept (default: DXTS_DATA_DIR, else ~/.dxts).",
        ),
    ] = None,
    db_url: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL of the database (default: DXTS_DB_URL, else the SQLite file "
            "dxts.sqlite in the data directory), e.g. mysql+asyncmy://user:pw@host:3306/dxts.",
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface the services listen on.")] = "127.0.0.1",
    definition_port: Annotated[int, typer.Option(help="0: a free port.")] = 0,
    execution_port: Annotated[int, typer.Option(help="0: a free port.")] = 0,
    accounting_port: Annotated[int, typer.Option(help="0: a free port.")] = 0,
    web_port: Annotated[
        int,
        typer.Option(
            help="The web view's port (0: the one this data directory's last start used, "
            "recorded in its web-port file, else a free port)."
        ),
    ] = 0,
    vo: Annotated[str, typer.Option(help="The VO of the token the commands use.")] = "local",
    workers: Annotated[
        int, typer.Option(min=1, help="Parcels the local backend runs at once.")
    ] = 2,
    verbose: Annotated[bool, typer.Option(help="The components' log on stderr too.")] = False,
    backend: Annotated[
        str,
        typer.Option(
            help="Where compute parcels run, an installed adaptor type (entry point group "
            "dxts.backends): 'local' (cwltool here), 'diracx' (jobs of the DiracX installation "
            "at --backend-url; its credentials from DXTS_DIRACX_*), 'slurm' (jobs of the Slurm "
            "cluster SLURM_CONF names; `scripts/slurm start` runs one here), or any other.",
        ),
    ] = "local",
    backend_url: Annotated[
        str | None,
        typer.Option(
            "--backend-url",
            "--diracx-url",
            help="The system the --backend adaptor drives, for one that needs it (DiracX).",
        ),
    ] = None,
) -> None:
    """Run every component in this process, on the embedded default (a laptop, a demo).

    Migrates the database first, then serves the definition, execution and accounting
    services, the dispatcher, the local backends (cwltool for compute parcels, local
    storage elements for data parcels) and the web view, and writes the addresses and a
    development token to the data directory for the other `dxts` commands. Ctrl-C (or
    SIGTERM) stops it cleanly; everything is kept in the data directory, so the next `dxts up`
    carries on.
    """
    directory = data_dir(data_dir_option)
    _private(directory)
    try:
        url = async_database_url(
            db_url
            or os.environ.get("DXTS_DB_URL")
            or f"sqlite+aiosqlite:///{directory / 'dxts.sqlite'}"
        )
    except DxtsError as error:
        typer.echo(f"error: --db-url: {error}", err=True)
        raise typer.Exit(2) from None
    ports = Ports(host, definition_port, execution_port, accounting_port, web_port)
    if backend not in (installed := plugins.adaptor_types()):
        typer.echo(f"error: --backend: one of {', '.join(installed)}, not {backend!r}", err=True)
        raise typer.Exit(1)
    _log_to(directory / LOG_FILE, verbose)
    try:
        with _only_one(directory):
            asyncio.run(_run(directory, url, ports, vo, workers, backend, backend_url))
    except DxtsError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None
    except OSError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None
