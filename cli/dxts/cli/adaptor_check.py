"""`dxts adaptor check ADDRESS`: the adaptor conformance checks (`adaptor_conformance`, the same
the pytest suite runs) against a running `BackendAdaptorService`, whatever language it is
written in, printing one PASS / FAIL / SKIP line per property with the reason, and exiting 1
when any failed. docs/adaptors.md gives the rules and how to run the checks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

import typer

from dxts.cli.adaptor_conformance import Failed, Target, Verdict, check_adaptor
from dxts.cli.client import EXIT_FAILED, fail_line
from dxts.cli.conformance_data import DataParcels, from_file
from dxts.cli.dispatcher_standin import serving_standin
from dxts.core.errors import DxtsError
from dxts.core.grpc import channel
from dxts.v1 import backend_pb2, backend_pb2_grpc

adaptor_app = typer.Typer(no_args_is_help=True, help="Backend adaptors: check one's contract.")


def restart_by(command: str) -> Callable[[], Awaitable[None]]:
    """A restart that runs `command` in a shell and fails the check if it does not succeed."""

    async def restart() -> None:
        process = await asyncio.create_subprocess_shell(command)
        status = await process.wait()
        if status != 0:
            raise Failed(f"the restart command exited {status}")

    return restart


async def _run(
    address: str,
    token: str | None,
    timeout_s: float,
    restart_command: str | None,
    dispatcher_listen: str | None,
    data: DataParcels | None,
) -> list[Verdict]:
    async with contextlib.AsyncExitStack() as stack:
        dispatcher = (
            await stack.enter_async_context(serving_standin(dispatcher_listen))
            if dispatcher_listen
            else None
        )
        opened = await stack.enter_async_context(
            channel(address, token=token, default_timeout=timeout_s)
        )
        stub = backend_pb2_grpc.BackendAdaptorServiceStub(opened)
        # Nothing answering there (or refusing this caller): one line saying so, not a FAIL of
        # every property for the same cause.
        await stub.Describe(backend_pb2.DescribeRequest())
        target = Target(
            stub,
            restart=restart_by(restart_command) if restart_command else None,
            dispatcher=dispatcher,
            data=data,
        )
        return await check_adaptor(target, timeout_s=timeout_s)


@adaptor_app.command()
def check(
    address: Annotated[str, typer.Argument(help="host:port of the BackendAdaptorService.")],
    token: Annotated[
        str | None,
        typer.Option(
            envvar="DXTS_TOKEN",
            help="Bearer token with the dispatcher role: adaptors answer the dispatcher only.",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option(min=1, help="Seconds a parcel may take to reach its outcome.")
    ] = 120.0,
    restart_command: Annotated[
        str | None,
        typer.Option(
            help="Shell command restarting the adaptor, for the restart-in-flight check "
            "(without it the check is skipped).",
            show_default=False,
        ),
    ] = None,
    dispatcher_listen: Annotated[
        str | None,
        typer.Option(
            help="host:port to serve a stand-in dispatcher on, for an adaptor in push mode "
            "configured to report there (without it push-mode is skipped for such an adaptor).",
            show_default=False,
        ),
    ] = None,
    data_parcels: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="JSON file of a data adaptor's check parcels: the requests naming its SEs and "
            "files (docs/adaptors.md; without it a data adaptor's checks that run a parcel are "
            "skipped).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Exercise an adaptor's contract: one PASS / FAIL / SKIP line per property, exit 1 on any
    failure."""
    data = from_file(data_parcels) if data_parcels else None
    try:
        verdicts = asyncio.run(
            _run(address, token, timeout, restart_command, dispatcher_listen, data)
        )
    except DxtsError as error:  # no adaptor there at all, or it refuses this caller
        fail_line(f"error: {address}: {error}")
        raise typer.Exit(EXIT_FAILED) from None
    for verdict in verdicts:
        typer.echo(verdict.line())
    failed = [v.name for v in verdicts if v.status == "FAIL"]
    if failed:
        typer.echo(f"{len(failed)} of {len(verdicts)} properties failed: {', '.join(failed)}")
        raise typer.Exit(1)
    typer.echo(f"the adaptor at {address} keeps the contract")
