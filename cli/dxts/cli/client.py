"""How the `dxts` command reaches the services (the stubs, opened on first use) and how a failed
call becomes one line on the terminal. Where the services are is `connection`'s business."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import grpc
import typer

from dxts.cli.connection import (
    DATA_DIR_VARIABLE,
    ENVIRONMENT,
    LOGIN_FILE,
    Connection,
    Options,
    running_data_dir,
)
from dxts.core.errors import DxtsError, InvalidArgument, Unauthenticated, Unavailable
from dxts.core.grpc.client import channel

if TYPE_CHECKING:
    from dxts.v1 import (
        accounting_pb2_grpc,
        definition_pb2_grpc,
        dispatcher_pb2_grpc,
        execution_pb2_grpc,
    )

T = TypeVar("T")

# A failed call or a refused request (2 is a usage error, as typer reports them; `watch` adds
# its own, see workgraphs.py).
EXIT_FAILED = 1


class Clients:
    """Stubs of the services (and the dispatcher, for job logs), each channel opened on first
    use."""

    def __init__(self, connection: Connection, looked_in: str = "") -> None:
        self.connection = connection
        # The connection file read, named when an address is missing.
        self.looked_in = looked_in
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _channel(self, service: str) -> grpc.aio.Channel:
        if service not in self._channels:
            address = getattr(self.connection, service)
            if not address:
                raise Unavailable(
                    f"no address for the {service} service "
                    f"(no {self.looked_in or 'connection file'}): start `dxts up`, point at "
                    f"its data directory with --data-dir or {DATA_DIR_VARIABLE}, or give the "
                    f"address with --{service} or {ENVIRONMENT[service]}"
                )
            token = self.connection.token_source or self.connection.token
            self._channels[service] = channel(address, token=token)
        return self._channels[service]

    # Each service's stubs are imported when first asked for: a command loads only the
    # contracts it calls (a module of stubs costs milliseconds of every command's start).

    @property
    def definition(self) -> definition_pb2_grpc.DefinitionServiceAsyncStub:
        from dxts.v1 import definition_pb2_grpc

        return definition_pb2_grpc.DefinitionServiceStub(self._channel("definition"))

    @property
    def execution(self) -> execution_pb2_grpc.ExecutionServiceAsyncStub:
        from dxts.v1 import execution_pb2_grpc

        return execution_pb2_grpc.ExecutionServiceStub(self._channel("execution"))

    @property
    def accounting(self) -> accounting_pb2_grpc.AccountingServiceAsyncStub:
        from dxts.v1 import accounting_pb2_grpc

        return accounting_pb2_grpc.AccountingServiceStub(self._channel("accounting"))

    @property
    def dispatcher(self) -> dispatcher_pb2_grpc.DispatcherServiceAsyncStub:
        from dxts.v1 import dispatcher_pb2_grpc

        return dispatcher_pb2_grpc.DispatcherServiceStub(self._channel("dispatcher"))

    async def close(self) -> None:
        for opened in self._channels.values():
            await opened.close()


def request_id() -> str:
    """A fresh idempotency key for one mutating call."""
    return str(uuid.uuid4())


def connection_of(ctx: typer.Context) -> Connection:
    return options_of(ctx).connection()


def options_of(ctx: typer.Context) -> Options:
    options = ctx.find_root().obj
    return options if isinstance(options, Options) else Options({})


def run(ctx: typer.Context, body: Callable[[Clients], Awaitable[T]]) -> T:
    """Run one command's calls; any failure is printed as one line (or one line per document
    problem) on stderr and ends the command with a non-zero status."""

    async def main() -> T:
        options = options_of(ctx)
        clients = Clients(options.connection(), options.where())
        try:
            return await body(clients)
        finally:
            await clients.close()

    try:
        return asyncio.run(main())
    except InvalidArgument as error:
        for violation in error.violations:
            fail_line(problem_line(violation.field, violation.description))
        raise typer.Exit(EXIT_FAILED) from None
    except Unauthenticated as error:
        fail_line(f"error: {error} ({_token_hint(ctx)})")
        raise typer.Exit(EXIT_FAILED) from None
    except DxtsError as error:
        fail_line(f"error: {error}")
        raise typer.Exit(EXIT_FAILED) from None
    except grpc.aio.AioRpcError as error:
        fail_line(f"error: {error.code().name.lower()}: {error.details()}")
        raise typer.Exit(EXIT_FAILED) from None


def _token_hint(ctx: typer.Context) -> str:
    """Where the refused token came from, for the one line saying it was refused."""
    options = options_of(ctx)
    given = options.values.get("token") or os.environ.get(ENVIRONMENT["token"])
    if not given and (running_data_dir(options.data_dir) / LOGIN_FILE).is_file():
        return "signed in with `dxts login`: is that sign-in current? run it again"
    return "is DXTS_TOKEN, or the token `dxts up` wrote, current?"


def fail_line(text: str) -> None:
    typer.echo(" ".join(text.split("\n")), err=True)


def _document_problems() -> frozenset[str]:
    """The kinds of document problems (imported only when a call failed)."""
    from dxts.cwl.problems import Kind

    return frozenset(kind.value for kind in Kind)


def problem_line(path: str, description: str) -> str:
    """A problem as `dxts validate` prints it: `error  kind  path  message` (the server sends a
    document problem's kind as its description's `kind: ` prefix), else `error  path  message`."""
    kind, separator, message = description.partition(": ")
    if separator and kind in _document_problems():
        return f"error  {kind}  {path or '.'}  {message}"
    return f"error  {path or '.'}  {description}"
