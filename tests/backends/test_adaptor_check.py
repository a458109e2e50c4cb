"""The conformance checks catch what they check: `dxts adaptor check ADDRESS` as a person runs it
passes an adaptor process it restarts with a command and that pushes to the stand-in dispatcher
it serves, and fails an adaptor that breaks idempotency, naming the property; each of the other
properties fails an adaptor that breaks it. (The shipped adaptors are checked by the one
conformance suite, tests/backends/test_adaptor_conformance.py, which runs the same checks.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from adaptor_serving import Served, serve_adaptor
from typer.testing import CliRunner

from dxts.backends.edge.dispatcher_client import GrpcOutcomeReporter
from dxts.backends.logic.adaptor import Adaptor
from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.cli.adaptor_conformance import PROPERTIES, Conformance, Target
from dxts.cli.dispatcher_standin import serving_standin
from dxts.cli.main import app
from dxts.core.adaptor.model import (
    Description,
    Outcome,
    OutcomeAck,
    OutcomeDisposition,
    Payload,
    Submission,
    SubmitResult,
)
from dxts.core.errors import Unavailable
from dxts.core.grpc import DevKeys, channel
from dxts.core.grpc.ports import free_port
from dxts.core.ids import id_to_str, new_id
from dxts.v1 import backend_pb2, backend_pb2_grpc


class ForgetfulAdaptor(NullAdaptor):
    """Breaks the contract's backbone: a second Submit of a key starts it again."""

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        for parcel in parcels:
            job = self.jobs.pop(parcel.parcel_id, None)
            if job is not None:  # forget it: the key is new again
                self.by_identifier[job.identifier].parcel_id = id_to_str(new_id())
        return await super().submit(payload, parcels)


class Unbounded(NullAdaptor):
    """Declares a capacity of 2 and accepts without limit."""

    async def describe(self) -> Description:
        return replace(await super().describe(), capacity=2)


class Undeclared(NullAdaptor):
    """Declares no limitation, yet writes no logs and forgets what it accepted on restart."""

    async def describe(self) -> Description:
        return replace(await super().describe(), limitations=frozenset())


class DeafReporter(GrpcOutcomeReporter):
    """Tells its adaptor every push was recorded: an outcome the dispatcher did not know yet is
    never pushed again."""

    async def report(self, backend: str, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        acks = await super().report(backend, outcomes)
        return [replace(ack, disposition=OutcomeDisposition.RECORDED) for ack in acks]


def pushing_once(dispatcher: str) -> NullAdaptor:
    settings = NullSettings(report_mode="push", dispatcher_address=dispatcher, push_interval_s=0.2)
    return NullAdaptor(settings, reporter=DeafReporter(dispatcher, token=None))


# Property → (an adaptor breaking it, given the stand-in dispatcher's address; what the check
# says).
BROKEN: dict[str, tuple[Callable[[str], Adaptor], str]] = {
    "capacity": (lambda _: Unbounded(NullSettings(delay_s=0.5)), "3 accepted at capacity 2"),
    "get-logs": (lambda _: Undeclared(NullSettings(delay_s=0.5)), "the logs of a finished job"),
    "restart-in-flight": (
        lambda _: Undeclared(NullSettings(delay_s=5)),
        "after the restart its key got another identifier",
    ),
    "push-mode": (pushing_once, "was not pushed again"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
async def test_an_adaptor_breaking_a_property_fails_it(name: str, tmp_path: Path) -> None:
    broken, reason = BROKEN[name]
    keys = DevKeys.load_or_create(tmp_path / "keys")
    token = keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
    async with serving_standin("127.0.0.1:0") as dispatcher:
        served = Served(lambda: broken(dispatcher.address), keys.verifier())
        await served.start()
        try:
            async with channel(served.address, token=token, default_timeout=30) as opened:
                stub = backend_pb2_grpc.BackendAdaptorServiceStub(opened)
                verdict = await Conformance(Target(stub, served.restart, dispatcher), 30).verdict(
                    name
                )
        finally:
            await served.stop()
    assert verdict.status == "FAIL", verdict.line()
    assert reason in verdict.reason, verdict.line()


async def test_an_adaptor_breaking_idempotency_fails_naming_the_property(
    tmp_path: Path,
) -> None:
    keys = DevKeys.load_or_create(tmp_path / "keys")
    adaptor = ForgetfulAdaptor(NullSettings())
    await adaptor.start()
    server = await serve_adaptor(adaptor, keys.verifier())
    token = keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
    try:
        result = await asyncio.to_thread(
            CliRunner().invoke, app, ["adaptor", "check", server.address, "--token", token]
        )
    finally:
        await server.stop(grace=0)
        await adaptor.stop()
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert any(
        line.startswith("FAIL idempotent-submit: the same key got two identifiers")
        for line in lines
    ), result.output
    assert "PASS describe: null" in result.output
    # Without --restart-command the restart check is skipped, saying how to run it.
    assert any(
        line.startswith("SKIP restart-in-flight: no way to restart") for line in lines
    ), result.output
    assert lines[-1].startswith(f"1 of {len(PROPERTIES)} properties failed: idempotent-submit")


# The properties that need a parcel run: on a data adaptor, only with its data parcels given.
RUNNING = (
    "idempotent-submit",
    "results-in-order",
    "refuses-cancelled-keys",
    "poll-terminal-outcome",
    "cancel-in-flight",
    "get-logs",
    "tool-failure",
    "capacity",
)


async def test_a_data_adaptor_is_checked_with_the_data_parcels_it_is_given(
    tmp_path: Path,
) -> None:
    """Without `--data-parcels` a data adaptor's properties that need a parcel are SKIPs
    saying what is missing, never PASSes; with the file, each is checked with its requests."""
    keys = DevKeys.load_or_create(tmp_path / "keys")
    adaptor = NullAdaptor(NullSettings(kind="data", delay_s=0.5, capacity=2))
    await adaptor.start()
    server = await serve_adaptor(adaptor, keys.verifier())
    token = keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
    copy = {"Type": "ReplicateAndRegister", "TargetSE": "SE-B", "Files": [{"LFN": "/lhcb/a"}]}
    parcels = tmp_path / "data-parcels.json"
    parcels.write_text(
        json.dumps(
            {
                "vo": "lhcb",
                "quick": {"Operations": [copy]},
                "long": {"Operations": [copy]},
                "failing": [
                    {
                        "request": {"Operations": [copy]},
                        "class": "stage-in",
                        "lfn": "/lhcb/a",
                        "storage_element": "SE-A",
                        "words": "no such file or directory",
                    }
                ],
            }
        )
    )
    check = ["adaptor", "check", server.address, "--token", token]
    try:
        without = await asyncio.to_thread(CliRunner().invoke, app, check)
        given = await asyncio.to_thread(
            CliRunner().invoke, app, [*check, "--data-parcels", str(parcels)]
        )
    finally:
        await server.stop(grace=0)
        await adaptor.stop()
    assert without.exit_code == 0, without.output
    assert given.exit_code == 0, given.output
    for name in RUNNING:
        assert f"SKIP {name}: a data adaptor's check parcels are requests" in without.output
        assert f"PASS {name}: " in given.output, given.output
    assert "PASS describe: null (KIND_DATA" in given.output


def restart_script(directory: Path, environment: dict[str, str]) -> Path:
    """A shell script (re)starting `dxts-backend-null` with `environment`: it stops the process
    it started before (its pid in `directory/pid`), if any, and starts another."""
    exports = "".join(f"export {name}='{value}'\n" for name, value in environment.items())
    script = directory / "restart.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"cd '{directory}'\n"
        "if [ -f pid ]; then\n"
        "  kill $(cat pid)\n"
        "  while kill -0 $(cat pid) 2>/dev/null; do sleep 0.1; done\n"
        "fi\n"
        f"{exports}"
        f"'{Path(sys.executable).parent / 'dxts-backend-null'}' >> adaptor.log 2>&1 &\n"
        "echo $! > pid\n"
    )
    script.chmod(0o755)
    return script


async def answering(address: str, token: str, patience_s: float = 90.0) -> None:
    """Once the adaptor process answers Describe (a loaded machine starts it slowly)."""
    async with channel(address, token=token, default_timeout=5) as opened:
        stub = backend_pb2_grpc.BackendAdaptorServiceStub(opened)
        for _ in range(int(patience_s / 0.2)):
            with contextlib.suppress(Unavailable):
                await stub.Describe(backend_pb2.DescribeRequest())
                return
            await asyncio.sleep(0.2)
    raise AssertionError(f"the adaptor at {address} never answered")


async def test_an_adaptor_process_passes_every_property_restarted_and_pushing(
    tmp_path: Path,
) -> None:
    address, dispatcher = (f"127.0.0.1:{free_port()}" for _ in range(2))
    token = DevKeys.load_or_create(tmp_path).issue("dxts", "dxts-dispatcher", ["dispatcher"])
    script = restart_script(
        tmp_path,
        {
            "DXTS_DATA_DIR": str(tmp_path),
            "DXTS_LISTEN": address,
            "DXTS_DISPATCHER_ADDRESS": dispatcher,
            "DXTS_NULL_REPORT_MODE": "push",
            "DXTS_NULL_PUSH_INTERVAL_S": "0.2",
            "DXTS_NULL_DELAY_S": "0.5",
            "DXTS_NULL_CAPACITY": "2",
        },
    )
    started = await asyncio.create_subprocess_exec(str(script))
    assert await started.wait() == 0
    try:
        await answering(address, token)
        result = await asyncio.to_thread(
            CliRunner().invoke,
            app,
            [
                "adaptor", "check", address, "--token", token,
                "--restart-command", str(script), "--dispatcher-listen", dispatcher,
            ],
        )  # fmt: skip
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int((tmp_path / "pid").read_text()), signal.SIGTERM)
    assert result.exit_code == 0, result.output + (tmp_path / "adaptor.log").read_text()[-3000:]
    lines = result.output.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == [f"PASS {name}" for name in PROPERTIES]
    assert "PASS push-mode: push mode" in result.output
    assert "PASS restart-in-flight: declares it forgets on restart" in result.output
