"""How the `dxts` command reaches the services: where they are, with which token, and how a
failed call becomes one line on the terminal.

Each value is taken from the first place that has it:

1. the command's global options (`dxts --definition HOST:PORT ... show WG`);
2. the environment: DXTS_DEFINITION_ADDRESS, DXTS_EXECUTION_ADDRESS, DXTS_ACCOUNTING_ADDRESS,
   DXTS_TOKEN, DXTS_WEB_URL;
3. the connection file `dxts up` writes into its data directory (`connection.json` in
   `--data-dir`, else DXTS_DATA_DIR, else ~/.dxts — the directory `dxts up` uses by default).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import grpc
import jwt
import typer

from dxts.core.errors import DxtsError, InvalidArgument, Unauthenticated, Unavailable
from dxts.core.grpc import channel
from dxts.cwl.problems import Kind as ProblemKind
from dxts.v1 import (
    accounting_pb2_grpc,
    definition_pb2_grpc,
    execution_pb2_grpc,
)

T = TypeVar("T")

CONNECTION_FILE = "connection.json"
DEFAULT_DATA_DIR = Path("~/.dxts")
ENVIRONMENT = {
    "definition": "DXTS_DEFINITION_ADDRESS",
    "execution": "DXTS_EXECUTION_ADDRESS",
    "accounting": "DXTS_ACCOUNTING_ADDRESS",
    "token": "DXTS_TOKEN",
    "web": "DXTS_WEB_URL",
}
# A failed call or a refused request (2 is a usage error, as typer reports them; `watch` adds
# its own, see workgraphs.py).
EXIT_FAILED = 1
DOCUMENT_PROBLEMS = frozenset(kind.value for kind in ProblemKind)


def data_dir(option: Path | None = None) -> Path:
    """The data directory: the option, else DXTS_DATA_DIR, else ~/.dxts."""
    value = option or (
        Path(os.environ["DXTS_DATA_DIR"]) if os.environ.get("DXTS_DATA_DIR") else None
    )
    return (value or DEFAULT_DATA_DIR).expanduser()


@dataclass
class Connection:
    """Where the services are and who is calling (any of them may be unknown)."""

    definition: str | None = None
    execution: str | None = None
    accounting: str | None = None
    token: str | None = None
    # The web view's URL (http://host:port), where `dxts up` serves it.
    web: str | None = None

    @classmethod
    def resolve(cls, options: dict[str, str | None], directory: Path) -> Connection:
        found = cls()
        path = directory / CONNECTION_FILE
        saved = _read_connection_file(path)
        for name, variable in ENVIRONMENT.items():
            value = options.get(name) or os.environ.get(variable) or saved.get(name)
            if value:
                setattr(found, name, value)
        return found

    def write(self, path: Path) -> None:
        """Save it (mode 0600: the token is a credential) for the commands to find."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        scratch = path.with_suffix(".tmp")
        scratch.unlink(missing_ok=True)
        # Created 0600, never readable by others even for an instant.
        descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(json.dumps(values, indent=1) + "\n")
        scratch.replace(path)

    def claims(self) -> dict[str, Any]:
        """The token's claims, unverified (the server verifies): for the caller's VO."""
        if not self.token:
            return {}
        try:
            return dict(jwt.decode(self.token, options={"verify_signature": False}))
        except jwt.PyJWTError:
            return {}


def _read_connection_file(path: Path) -> dict[str, str]:
    try:
        values = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise InvalidArgument(f"cannot read {path}: {error}", field="connection") from None
    return (
        {k: v for k, v in values.items() if isinstance(v, str)} if isinstance(values, dict) else {}
    )


class Clients:
    """Stubs of the three services, each channel opened on first use."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _channel(self, service: str) -> grpc.aio.Channel:
        if service not in self._channels:
            address = getattr(self.connection, service)
            if not address:
                raise Unavailable(
                    f"no address for the {service} service: start `dxts up`, or set "
                    f"{ENVIRONMENT[service]} (or pass --{service})"
                )
            self._channels[service] = channel(address, token=self.connection.token)
        return self._channels[service]

    @property
    def definition(self) -> definition_pb2_grpc.DefinitionServiceAsyncStub:
        return definition_pb2_grpc.DefinitionServiceStub(self._channel("definition"))

    @property
    def execution(self) -> execution_pb2_grpc.ExecutionServiceAsyncStub:
        return execution_pb2_grpc.ExecutionServiceStub(self._channel("execution"))

    @property
    def accounting(self) -> accounting_pb2_grpc.AccountingServiceAsyncStub:
        return accounting_pb2_grpc.AccountingServiceStub(self._channel("accounting"))

    async def close(self) -> None:
        for opened in self._channels.values():
            await opened.close()


def request_id() -> str:
    """A fresh idempotency key for one mutating call."""
    return str(uuid.uuid4())


@dataclass
class Options:
    """The global options of one command line, resolved into a Connection on first use (so
    that a command needing no service, like `validate`, never reads the connection file)."""

    values: dict[str, str | None]
    data_dir: Path | None = None
    resolved: Connection | None = None


def connection_of(ctx: typer.Context) -> Connection:
    options = ctx.find_root().obj
    if not isinstance(options, Options):
        options = Options({})
    if options.resolved is None:
        options.resolved = Connection.resolve(options.values, data_dir(options.data_dir))
    return options.resolved


def run(ctx: typer.Context, body: Callable[[Clients], Awaitable[T]]) -> T:
    """Run one command's calls; any failure is printed as one line (or one line per document
    problem) on stderr and ends the command with a non-zero status."""

    async def main() -> T:
        clients = Clients(connection_of(ctx))
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
        fail_line(f"error: {error} (is DXTS_TOKEN, or the token `dxts up` wrote, current?)")
        raise typer.Exit(EXIT_FAILED) from None
    except DxtsError as error:
        fail_line(f"error: {error}")
        raise typer.Exit(EXIT_FAILED) from None
    except grpc.aio.AioRpcError as error:
        fail_line(f"error: {error.code().name.lower()}: {error.details()}")
        raise typer.Exit(EXIT_FAILED) from None


def fail_line(text: str) -> None:
    typer.echo(" ".join(text.split("\n")), err=True)


def problem_line(path: str, description: str) -> str:
    """A problem as `dxts validate` prints it: `error  kind  path  message` (the server sends a
    document problem's kind as its description's `kind: ` prefix), else `error  path  message`."""
    kind, separator, message = description.partition(": ")
    if separator and kind in DOCUMENT_PROBLEMS:
        return f"error  {kind}  {path or '.'}  {message}"
    return f"error  {path or '.'}  {description}"
