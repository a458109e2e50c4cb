"""`dxts adaptor check ADDRESS`: the conformance kit for backend adaptors.

It speaks only the contract (`protos/dxts/v1/backend.proto`) to a running
`BackendAdaptorService`, whatever language it is written in, and checks each property the
dispatcher relies on (docs/adaptors.md gives the rules), printing one PASS / FAIL / SKIP line
per property with the reason, and exiting 1 when any failed. The parcels it submits run one
tiny CWL tool (`sleep SECONDS`): a compute adaptor must be able to run it; an adaptor that runs
nothing (the null adaptor) passes as long as its answers keep the contract.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import grpc
import typer

from dxts.cli.client import EXIT_FAILED, fail_line
from dxts.core.errors import DxtsError
from dxts.core.grpc import channel
from dxts.core.ids import content_hash, hash_to_str, id_to_str, new_id
from dxts.v1 import backend_pb2, backend_pb2_grpc, common_pb2

adaptor_app = typer.Typer(no_args_is_help=True, help="Backend adaptors: check one's contract.")

SLEEP = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": ["sleep"],
    "inputs": {"seconds": {"type": "int", "inputBinding": {"position": 1}}},
    "outputs": {},
}
LONG_SLEEP_S = 600  # the parcel a cancellation must stop: it would run for ten minutes
ACCEPTED = backend_pb2.SUBMIT_DISPOSITION_ACCEPTED
REFUSED = backend_pb2.SUBMIT_DISPOSITION_REFUSED
CANCELLED = common_pb2.OUTCOME_RESULT_CANCELLED


class Failed(Exception):
    """The property does not hold: why."""


class Skipped(Exception):
    """The property cannot be exercised on this adaptor: why."""


@dataclass(frozen=True)
class Verdict:
    name: str
    status: str  # PASS, FAIL or SKIP
    reason: str

    def line(self) -> str:
        return f"{self.status} {self.name}: {self.reason}"


def tool_payload(tool: dict[str, Any]) -> backend_pb2.Payload:
    """A compute payload of one self-contained CWL tool, with an empty sidecar."""
    process_id = hash_to_str(content_hash(tool))
    return backend_pb2.Payload(
        compute=backend_pb2.ComputePayload(
            process_id=process_id,
            processes=[
                backend_pb2.ProcessDocument(process_id=process_id, document_json=json.dumps(tool))
            ],
            resolved_hints_id="0" * 64,
            resolved_hints_json="{}",
        )
    )


def _parcel(seconds: int = 0, parcel_id: str | None = None) -> backend_pb2.ParcelSubmission:
    key = parcel_id or id_to_str(new_id())
    return backend_pb2.ParcelSubmission(
        parcel_id=key,
        parameters_json=json.dumps({"seconds": seconds}),
        output_prefix=f"/dxts/adaptor-check/{key}",
    )


def _expect(condition: bool, reason: str) -> None:
    if not condition:
        raise Failed(reason)


class Checker:
    """The properties, each an async method run in order against one adaptor."""

    def __init__(self, stub: Any, timeout_s: float) -> None:
        self.stub = stub
        self.timeout_s = timeout_s
        self.payload = tool_payload(SLEEP)
        self.kind = common_pb2.KIND_UNSPECIFIED

    async def submit(self, *parcels: backend_pb2.ParcelSubmission) -> list[Any]:
        reply = await self.stub.Submit(
            backend_pb2.SubmitRequest(payload=self.payload, parcels=parcels)
        )
        return list(reply.results)

    async def counters(self) -> dict[str, int]:
        return dict((await self.stub.Describe(backend_pb2.DescribeRequest())).counters)

    async def accepted(self, parcel: backend_pb2.ParcelSubmission) -> str:
        (result,) = await self.submit(parcel)
        if result.disposition != ACCEPTED:
            raise Skipped(f"the adaptor refused the check's parcel: {result.reason}")
        return str(result.identifier)

    async def outcome(self, identifier: str) -> common_pb2.Outcome:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            reply = await self.stub.Poll(backend_pb2.PollRequest(identifiers=[identifier]))
            if reply.outcomes:
                return reply.outcomes[0]
            _expect(identifier not in reply.unknown_identifiers, f"{identifier} became unknown")
            await asyncio.sleep(0.2)
        raise Failed(f"no terminal outcome for {identifier} within {self.timeout_s:g}s")

    # -- the properties -----------------------------------------------------------------------

    async def describe(self) -> str:
        reply = await self.stub.Describe(backend_pb2.DescribeRequest())
        _expect(bool(reply.name), "Describe gives no name")
        _expect(reply.kind != common_pb2.KIND_UNSPECIFIED, "Describe gives no kind")
        _expect(reply.report_mode != backend_pb2.REPORT_MODE_UNSPECIFIED, "no report mode")
        _expect(reply.capacity >= 0, f"capacity {reply.capacity} is negative")
        self.kind = reply.kind
        return f"{reply.name} ({common_pb2.Kind.Name(reply.kind)}, version {reply.version!r})"

    async def idempotent_submit(self) -> str:
        if self.kind != common_pb2.KIND_COMPUTE:
            raise Skipped("the check's parcels are compute parcels")
        parcel = _parcel()
        before = await self.counters()
        first, second = await self.submit(parcel), await self.submit(parcel)
        _expect(first[0].disposition == ACCEPTED, f"refused: {first[0].reason}")
        _expect(second[0].disposition == ACCEPTED, "a second Submit of an accepted key is refused")
        _expect(
            first[0].identifier == second[0].identifier,
            f"the same key got two identifiers ({first[0].identifier}, {second[0].identifier})",
        )
        after = await self.counters()
        if "started" in before:
            started = after.get("started", 0) - before["started"]
            _expect(started == 1, f"two Submits of one key started {started} runs")
        await self.outcome(first[0].identifier)
        return "the same key twice: one identifier" + (", one run" if "started" in before else "")

    async def results_in_order(self) -> str:
        parcels = [_parcel(), backend_pb2.ParcelSubmission(parcel_id="not-a-uuid"), _parcel()]
        results = await self.submit(*parcels)
        _expect(
            [r.parcel_id for r in results] == [p.parcel_id for p in parcels],
            "Submit's results are not one per parcel in request order",
        )
        # Waited for together: the parcels may run side by side (each is a batch job on Slurm).
        await asyncio.gather(
            *(self.outcome(r.identifier) for r in results if r.disposition == ACCEPTED)
        )
        return "one result per parcel, in order"

    async def refuses_malformed_keys(self) -> str:
        results = await self.submit(
            backend_pb2.ParcelSubmission(parcel_id="not-a-uuid"),
            backend_pb2.ParcelSubmission(parcel_id=""),
        )
        for result in results:
            _expect(result.disposition == REFUSED, f"key {result.parcel_id!r} was not refused")
            _expect(bool(result.reason), f"key {result.parcel_id!r} refused without a reason")
        return "keys that are not UUIDs are refused, with a reason"

    async def refuses_cancelled_keys(self) -> str:
        parcel = _parcel()
        reply = await self.stub.Cancel(backend_pb2.CancelRequest(parcel_ids=[parcel.parcel_id]))
        _expect(
            [(k.parcel_id, k.identifier) for k in reply.keys] == [(parcel.parcel_id, "")],
            "Cancel of a key never accepted must answer it with no identifier",
        )
        (result,) = await self.submit(parcel)
        _expect(result.disposition == REFUSED, "a key cancelled before acceptance was accepted")
        return "a key cancelled before it was accepted is refused from then on"

    async def poll(self) -> str:
        if self.kind != common_pb2.KIND_COMPUTE:
            raise Skipped("the check's parcels are compute parcels")
        parcel = _parcel()
        identifier = await self.accepted(parcel)
        outcome = await self.outcome(identifier)
        _expect(
            (outcome.parcel_id, outcome.identifier) == (parcel.parcel_id, identifier),
            "the outcome names another parcel or identifier",
        )
        _expect(outcome.result != common_pb2.OUTCOME_RESULT_UNSPECIFIED, "no result")
        again = await self.stub.Poll(backend_pb2.PollRequest(identifiers=[identifier]))
        _expect(
            [o.result for o in again.outcomes] == [outcome.result],
            "a terminal outcome is not reported again by the next Poll",
        )
        return f"terminal outcome {common_pb2.OutcomeResult.Name(outcome.result)}, reported again"

    async def lost_identifiers(self) -> str:
        stranger = id_to_str(new_id())
        reply = await self.stub.Poll(backend_pb2.PollRequest(identifiers=[stranger]))
        _expect(list(reply.unknown_identifiers) == [stranger], "an unknown identifier not listed")
        _expect(not reply.outcomes, "an outcome for an identifier never issued")
        cancel = await self.stub.Cancel(backend_pb2.CancelRequest(identifiers=[stranger]))
        _expect(list(cancel.unknown_identifiers) == [stranger], "Cancel: unknown not listed")
        return "identifiers it never issued are listed unknown by Poll and Cancel"

    async def cancel_in_flight(self) -> str:
        if self.kind != common_pb2.KIND_COMPUTE:
            raise Skipped("the check's parcels are compute parcels")
        identifier = await self.accepted(_parcel(LONG_SLEEP_S))
        early = await self.stub.Poll(backend_pb2.PollRequest(identifiers=[identifier]))
        if early.outcomes:
            raise Skipped("the parcel ended before it could be cancelled")
        await self.stub.Cancel(backend_pb2.CancelRequest(identifiers=[identifier]))
        outcome = await self.outcome(identifier)
        _expect(
            outcome.result == CANCELLED,
            f"ended {common_pb2.OutcomeResult.Name(outcome.result)}, not CANCELLED",
        )
        return "an in-flight parcel ends CANCELLED"

    async def empty_requests(self) -> str:
        submitted = await self.stub.Submit(backend_pb2.SubmitRequest(payload=self.payload))
        polled = await self.stub.Poll(backend_pb2.PollRequest())
        cancelled = await self.stub.Cancel(backend_pb2.CancelRequest())
        _expect(not submitted.results, "an empty Submit has results")
        _expect(not polled.outcomes and not polled.unknown_identifiers, "an empty Poll answers")
        _expect(not cancelled.keys and not cancelled.unknown_identifiers, "empty Cancel answers")
        return "empty Submit, Poll and Cancel answer empty"

    def properties(self) -> list[tuple[str, Callable[[], Awaitable[str]]]]:
        return [
            ("describe", self.describe),
            ("idempotent-submit", self.idempotent_submit),
            ("results-in-order", self.results_in_order),
            ("refuses-malformed-keys", self.refuses_malformed_keys),
            ("refuses-cancelled-keys", self.refuses_cancelled_keys),
            ("poll-terminal-outcome", self.poll),
            ("lost-identifiers", self.lost_identifiers),
            ("cancel-in-flight", self.cancel_in_flight),
            ("empty-requests", self.empty_requests),
        ]


async def check_adaptor(stub: Any, *, timeout_s: float = 120.0) -> list[Verdict]:
    """Every property's verdict, in order (an RPC error fails the property, naming it)."""
    checker = Checker(stub, timeout_s)
    verdicts = []
    for name, prove in checker.properties():
        try:
            verdicts.append(Verdict(name, "PASS", await prove()))
        except Failed as failure:
            verdicts.append(Verdict(name, "FAIL", str(failure)))
        except Skipped as skip:
            verdicts.append(Verdict(name, "SKIP", str(skip)))
        except grpc.aio.AioRpcError as error:
            verdicts.append(Verdict(name, "FAIL", f"{error.code().name}: {error.details()}"))
    return verdicts


async def _run(address: str, token: str | None, timeout_s: float) -> list[Verdict]:
    async with channel(address, token=token, default_timeout=timeout_s) as opened:
        return await check_adaptor(
            backend_pb2_grpc.BackendAdaptorServiceStub(opened), timeout_s=timeout_s
        )


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
) -> None:
    """Exercise an adaptor's contract: one PASS / FAIL / SKIP line per property, exit 1 on any
    failure."""
    try:
        verdicts = asyncio.run(_run(address, token, timeout))
    except DxtsError as error:  # no adaptor there at all (an address that does not resolve)
        fail_line(f"error: {address}: {error}")
        raise typer.Exit(EXIT_FAILED) from None
    for verdict in verdicts:
        typer.echo(verdict.line())
    failed = [v.name for v in verdicts if v.status == "FAIL"]
    if failed:
        typer.echo(f"{len(failed)} of {len(verdicts)} properties failed: {', '.join(failed)}")
        raise typer.Exit(1)
    typer.echo(f"the adaptor at {address} keeps the contract")
