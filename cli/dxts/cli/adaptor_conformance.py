"""The adaptor conformance checks: the properties the dispatcher relies on, each checked against a
live adaptor over gRPC (`protos/dxts/v1/backend.proto`), whatever language it is written in.

`dxts adaptor check ADDRESS` and the pytest suite (`pytest -m adaptor_conformance`) run these
same checks; docs/adaptors.md gives the rules they check. The checks follow the kind the adaptor
describes. A compute adaptor's parcels run one tiny CWL tool (`sleep SECONDS`): it must be able
to run it; an adaptor that runs nothing (the null adaptor) passes as long as its answers keep
the contract. One more tool fails on purpose (`tool-failure`): the failure taxonomy every
adaptor reports (docs/adaptors.md). A data adaptor's parcels are data requests given to the
checks (`conformance_data.DataParcels`: they name its storage elements and files): quick ones,
transfers that cannot end for minutes where a compute parcel sleeps ten minutes, and copies
that fail for the storage's own reasons where a tool fails. What an adaptor cannot do it
declares in Describe (`limitations`), and the checks then hold it to the declared behaviour
instead. Some checks need something around the adaptor (`Target`): a way to restart it, a
dispatcher stand-in to push outcomes to, a data adaptor's requests; without them they are
skipped, saying so.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from dxts.cli.conformance_data import DataParcels
from dxts.cli.dispatcher_standin import DispatcherStandIn
from dxts.core.errors import DxtsError, NotFound, Unavailable
from dxts.core.ids import content_hash, hash_to_str, id_to_str, new_id
from dxts.v1 import backend_pb2, common_pb2

SLEEP = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": ["sleep"],
    "inputs": {"seconds": {"type": "int", "inputBinding": {"position": 1}}},
    "outputs": {},
}
# A tool that fails as payloads do: 50 lines of stderr with one marked error line among them,
# then an exit status of its own; the adaptor must report the marked line, not the runner's log.
FAILING_TOOL = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": ["sh", "-c"],
    "inputs": {
        "script": {"type": "string", "inputBinding": {"position": 1}},
        "seconds": {"type": "int?"},
    },
    "outputs": {},
}
TOOL_EXIT_STATUS = 7
NOISE_LINES = 50


def failing_script(marked: str, status: int = TOOL_EXIT_STATUS) -> str:
    """A shell script writing `NOISE_LINES` ordinary stderr lines with `marked` in the middle,
    then exiting with `status`."""
    half = NOISE_LINES // 2
    noise = (
        'i=0; while [ $i -lt {n} ]; do echo "step $i of the work: going fine" >&2; i=$((i+1)); done'
    )
    rest = noise.format(n=NOISE_LINES - half)
    return "; ".join([noise.format(n=half), f"echo '{marked}' >&2", rest, f"exit {status}"])


LONG_SLEEP_S = 600  # a parcel that must be stopped: it would run for ten minutes
QUICK, LONG, RESTARTED = "quick", "long", "restarted"  # what `Conformance.parcel` makes
RESTART_SLEEP_S = 10  # a parcel still running when the adaptor restarts
LOG_BYTES = 64  # what the logs check asks GetLogs for, of each stream
MOST_FILLED = 16  # the largest capacity the capacity check fills with parcels
ACCEPTED = backend_pb2.SUBMIT_DISPOSITION_ACCEPTED
REFUSED = backend_pb2.SUBMIT_DISPOSITION_REFUSED
CANCELLED = common_pb2.OUTCOME_RESULT_CANCELLED
FAILED = common_pb2.OUTCOME_RESULT_FAILED
NO_LOGS = backend_pb2.LIMITATION_NO_LOGS
FORGETS_ON_RESTART = backend_pb2.LIMITATION_FORGETS_ON_RESTART

# Every property, in the order they run (each a method of `Conformance`).
PROPERTIES = (
    "describe",
    "idempotent-submit",
    "results-in-order",
    "refuses-malformed-keys",
    "refuses-cancelled-keys",
    "poll-terminal-outcome",
    "lost-identifiers",
    "cancel-in-flight",
    "empty-requests",
    "get-logs",
    "tool-failure",
    "push-mode",
    "capacity",
    "restart-in-flight",
)


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


@dataclass
class Target:
    """A live adaptor: its stub (`BackendAdaptorServiceStub`), how to restart it (returns once
    the restart is under way; the checks wait for it to answer again), and the dispatcher
    stand-in it pushes to when it reports in push mode.

    By default the check parcels run `sleep SECONDS`. An adaptor whose parcels must move data
    to be checked at all (one staging over a storage server) is given a `tool` taking
    `seconds` and more `inputs` (the same for every check parcel, e.g. an `lfn:` File), and a
    `verify` that reads each check parcel's terminal outcome: the words of what is wrong with
    it (a succeeded parcel's outputs not where the outcome says), or None. A data adaptor's
    check parcels are the `data` requests (without them, the checks that need a parcel run are
    skipped, saying so)."""

    stub: Any
    restart: Callable[[], Awaitable[None]] | None = None
    dispatcher: DispatcherStandIn | None = None
    tool: dict[str, Any] = field(default_factory=lambda: SLEEP)
    inputs: dict[str, Any] = field(default_factory=dict)
    verify: Callable[[common_pb2.Outcome], Awaitable[str | None]] | None = None
    data: DataParcels | None = None


DATA_PAYLOAD = backend_pb2.Payload(data=backend_pb2.DataPayload())


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


def _expect(condition: bool, reason: str) -> None:
    if not condition:
        raise Failed(reason)


def _result(outcome: common_pb2.Outcome) -> str:
    return common_pb2.OutcomeResult.Name(outcome.result)


class Conformance:
    """The properties against one adaptor, each the async method named after it (`get-logs`:
    `get_logs`) answering why it holds; `verdict(name)` runs one."""

    def __init__(self, target: Target, timeout_s: float) -> None:
        self.target = target
        self.stub = target.stub
        self.timeout_s = timeout_s
        self.description: backend_pb2.DescribeResponse | None = None

    async def verdict(self, name: str) -> Verdict:
        """Run one property (an RPC error fails it, naming the error)."""
        try:
            if self.description is None:
                self.description = await self.stub.Describe(backend_pb2.DescribeRequest())
            check: Callable[[], Awaitable[str]] = getattr(self, name.replace("-", "_"))
            return Verdict(name, "PASS", await check())
        except Failed as failure:
            return Verdict(name, "FAIL", str(failure))
        except Skipped as skip:
            return Verdict(name, "SKIP", str(skip))
        except grpc.aio.AioRpcError as error:
            return Verdict(name, "FAIL", f"{error.code().name}: {error.details()}")
        except DxtsError as error:  # an RPC error, as the dxts channel reads it
            return Verdict(name, "FAIL", f"{type(error).__name__}: {error}")

    # -- what the properties share ------------------------------------------------------------

    @property
    def declared(self) -> backend_pb2.DescribeResponse:
        assert self.description is not None
        return self.description

    @property
    def moves_data(self) -> bool:
        return self.declared.kind == common_pb2.KIND_DATA

    @property
    def payload(self) -> backend_pb2.Payload:
        """What every check parcel of the adaptor's kind shares."""
        return DATA_PAYLOAD if self.moves_data else tool_payload(self.target.tool)

    def runs_the_check_parcels(self) -> None:
        if self.moves_data and self.target.data is None:
            raise Skipped(
                "a data adaptor's check parcels are requests naming its storage elements and "
                "files, and none were given (--data-parcels)"
            )
        if self.declared.kind not in (common_pb2.KIND_COMPUTE, common_pb2.KIND_DATA):
            raise Skipped(f"no check parcels for kind {common_pb2.Kind.Name(self.declared.kind)}")

    async def submit(self, *parcels: backend_pb2.ParcelSubmission) -> list[Any]:
        reply = await self.stub.Submit(
            backend_pb2.SubmitRequest(payload=self.payload, parcels=parcels)
        )
        return list(reply.results)

    async def counters(self) -> dict[str, int]:
        return dict((await self.stub.Describe(backend_pb2.DescribeRequest())).counters)

    async def accepted(self, parcel: backend_pb2.ParcelSubmission) -> str:
        (result,) = await self.submit(parcel)
        _expect(result.disposition == ACCEPTED, f"the check's parcel was refused: {result.reason}")
        return str(result.identifier)

    async def parcel(self, kind: str = QUICK) -> backend_pb2.ParcelSubmission:
        """A check parcel of the adaptor's kind: QUICK ends soon, LONG would run for ten
        minutes, RESTARTED is still running when the adaptor restarts (a compute parcel's tool
        sleeping that long; a data adaptor's quick or long request)."""
        key = id_to_str(new_id())
        if self.moves_data:
            assert self.target.data is not None
            make = self.target.data.quick if kind == QUICK else self.target.data.long
            return backend_pb2.ParcelSubmission(
                parcel_id=key,
                request_json=await make(),
                output_prefix=f"/dxts/adaptor-check/{key}",
                vo=self.target.data.vo,
            )
        seconds = {QUICK: 0, LONG: LONG_SLEEP_S, RESTARTED: RESTART_SLEEP_S}[kind]
        return backend_pb2.ParcelSubmission(
            parcel_id=key,
            parameters_json=json.dumps({**self.target.inputs, "seconds": seconds}),
            output_prefix=f"/dxts/adaptor-check/{key}",
        )

    async def outcome(self, identifier: str) -> common_pb2.Outcome:
        """The parcel's terminal outcome (checked by the target's `verify`, when it has one)."""
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            reply = await self.stub.Poll(backend_pb2.PollRequest(identifiers=[identifier]))
            if reply.outcomes:
                if self.target.verify is not None:
                    problem = await self.target.verify(reply.outcomes[0])
                    _expect(problem is None, f"{identifier}: {problem}")
                return reply.outcomes[0]
            _expect(identifier not in reply.unknown_identifiers, f"{identifier} became unknown")
            await asyncio.sleep(0.2)
        raise Failed(f"no terminal outcome for {identifier} within {self.timeout_s:g}s")

    async def still_running(self, identifier: str) -> bool:
        reply = await self.stub.Poll(backend_pb2.PollRequest(identifiers=[identifier]))
        return not reply.outcomes

    async def answering(self) -> None:
        """Wait for the adaptor to answer Describe again (after a restart)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                await self.stub.Describe(backend_pb2.DescribeRequest())
                return
            except (grpc.aio.AioRpcError, Unavailable) as error:
                down = isinstance(error, Unavailable) or error.code() == grpc.StatusCode.UNAVAILABLE
                if not down or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    # -- the properties -----------------------------------------------------------------------

    async def describe(self) -> str:
        reply = self.declared
        _expect(bool(reply.name), "Describe gives no name")
        _expect(reply.kind != common_pb2.KIND_UNSPECIFIED, "Describe gives no kind")
        _expect(reply.report_mode != backend_pb2.REPORT_MODE_UNSPECIFIED, "no report mode")
        _expect(reply.capacity >= 0, f"capacity {reply.capacity} is negative")
        limits = [backend_pb2.Limitation.Name(n) for n in reply.limitations]
        return f"{reply.name} ({common_pb2.Kind.Name(reply.kind)}, version {reply.version!r})" + (
            f", declaring {', '.join(limits)}" if limits else ""
        )

    async def idempotent_submit(self) -> str:
        self.runs_the_check_parcels()
        parcel = await self.parcel()
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
        self.runs_the_check_parcels()
        parcels = [
            await self.parcel(),
            backend_pb2.ParcelSubmission(parcel_id="not-a-uuid"),
            await self.parcel(),
        ]
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
        self.runs_the_check_parcels()
        parcel = await self.parcel()
        reply = await self.stub.Cancel(backend_pb2.CancelRequest(parcel_ids=[parcel.parcel_id]))
        _expect(
            [(k.parcel_id, k.identifier) for k in reply.keys] == [(parcel.parcel_id, "")],
            "Cancel of a key never accepted must answer it with no identifier",
        )
        (result,) = await self.submit(parcel)
        _expect(result.disposition == REFUSED, "a key cancelled before acceptance was accepted")
        return "a key cancelled before it was accepted is refused from then on"

    async def poll_terminal_outcome(self) -> str:
        self.runs_the_check_parcels()
        parcel = await self.parcel()
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
        return f"terminal outcome {_result(outcome)}, reported again"

    async def lost_identifiers(self) -> str:
        stranger = id_to_str(new_id())
        reply = await self.stub.Poll(backend_pb2.PollRequest(identifiers=[stranger]))
        _expect(list(reply.unknown_identifiers) == [stranger], "an unknown identifier not listed")
        _expect(not reply.outcomes, "an outcome for an identifier never issued")
        cancel = await self.stub.Cancel(backend_pb2.CancelRequest(identifiers=[stranger]))
        _expect(list(cancel.unknown_identifiers) == [stranger], "Cancel: unknown not listed")
        return "identifiers it never issued are listed unknown by Poll and Cancel"

    async def cancel_in_flight(self) -> str:
        self.runs_the_check_parcels()
        identifier = await self.accepted(await self.parcel(LONG))
        if not await self.still_running(identifier):
            raise Skipped("the parcel ended before it could be cancelled")
        await self.stub.Cancel(backend_pb2.CancelRequest(identifiers=[identifier]))
        outcome = await self.outcome(identifier)
        _expect(outcome.result == CANCELLED, f"ended {_result(outcome)}, not CANCELLED")
        return "an in-flight parcel ends CANCELLED"

    async def empty_requests(self) -> str:
        submitted = await self.stub.Submit(backend_pb2.SubmitRequest(payload=self.payload))
        polled = await self.stub.Poll(backend_pb2.PollRequest())
        cancelled = await self.stub.Cancel(backend_pb2.CancelRequest())
        _expect(not submitted.results, "an empty Submit has results")
        _expect(not polled.outcomes and not polled.unknown_identifiers, "an empty Poll answers")
        _expect(not cancelled.keys and not cancelled.unknown_identifiers, "empty Cancel answers")
        return "empty Submit, Poll and Cancel answer empty"

    async def get_logs(self) -> str:
        stranger = id_to_str(new_id())
        try:
            await self.stub.GetLogs(backend_pb2.GetLogsRequest(identifier=stranger))
            raise Failed("GetLogs of an identifier never issued answers instead of NOT_FOUND")
        except NotFound:  # the dxts channel's reading of NOT_FOUND
            pass
        except grpc.aio.AioRpcError as error:
            _expect(
                error.code() == grpc.StatusCode.NOT_FOUND,
                f"GetLogs of an identifier never issued: {error.code().name}, not NOT_FOUND",
            )
        self.runs_the_check_parcels()
        identifier = await self.accepted(await self.parcel())
        await self.outcome(identifier)
        reply = await self.stub.GetLogs(
            backend_pb2.GetLogsRequest(identifier=identifier, max_bytes=LOG_BYTES)
        )
        logs = reply.logs
        for stream, text in (("stdout", logs.stdout), ("stderr", logs.stderr)):
            _expect(
                len(text) <= LOG_BYTES, f"{stream}: {len(text)} characters for {LOG_BYTES} asked"
            )
        if NO_LOGS in self.declared.limitations:
            _expect(not logs.stdout and not logs.stderr, "declares no logs, yet gives some")
            return "declares no logs: empty logs of a job it ran, NOT_FOUND for one it did not"
        _expect(
            bool(logs.stdout or logs.stderr or logs.sandbox),
            "the logs of a finished job say nothing: no output, and not where it is",
        )
        return f"the end of a finished job's logs (at most {LOG_BYTES} bytes), NOT_FOUND otherwise"

    async def tool_failure(self) -> str:
        self.runs_the_check_parcels()
        if self.moves_data:
            return await self.data_failure()
        marked = f"ERROR: the conformance check marked line {id_to_str(new_id())[-12:]}"
        key = id_to_str(new_id())
        parcel = backend_pb2.ParcelSubmission(
            parcel_id=key,
            parameters_json=json.dumps({"script": failing_script(marked)}),
            output_prefix=f"/dxts/adaptor-check/{key}",
        )
        reply = await self.stub.Submit(
            backend_pb2.SubmitRequest(payload=tool_payload(FAILING_TOOL), parcels=[parcel])
        )
        (result,) = reply.results
        _expect(result.disposition == ACCEPTED, f"the failing parcel was refused: {result.reason}")
        outcome = await self.outcome(result.identifier)
        if NO_LOGS in self.declared.limitations and outcome.result != FAILED:
            return f"runs nothing (declares no logs): the failing tool ended {_result(outcome)}"
        _expect(outcome.result == FAILED, f"a tool exiting {TOOL_EXIT_STATUS}: {_result(outcome)}")
        failure = outcome.failure
        _expect(
            failure.failure_class == common_pb2.FAILURE_CLASS_APPLICATION_ERROR,
            f"class {common_pb2.FailureClass.Name(failure.failure_class)}, not APPLICATION_ERROR",
        )
        _expect(
            outcome.HasField("exit_code") and outcome.exit_code == TOOL_EXIT_STATUS,
            f"exit code {outcome.exit_code if outcome.HasField('exit_code') else 'unset'}, "
            f"not the tool's {TOOL_EXIT_STATUS}",
        )
        _expect(
            failure.tool_message == marked,
            f"the tool's message is {failure.tool_message!r}, not its marked line {marked!r}",
        )
        return (
            f"a tool exiting {TOOL_EXIT_STATUS} after a marked line among {NOISE_LINES}: "
            "APPLICATION_ERROR, its exit code and exactly that line"
        )

    async def data_failure(self) -> str:
        """`tool-failure` for a data adaptor: each failing request (submitted together) ends
        FAILED with its class, naming its file and storage element, in the storage's words. No
        exit code is asked for: no process of the payload's exits."""
        assert self.target.data is not None
        expected = await self.target.data.failing()
        _expect(bool(expected), "no failing data request was given to check")
        parcels = [
            backend_pb2.ParcelSubmission(
                parcel_id=id_to_str(new_id()),
                request_json=failing.request_json,
                vo=self.target.data.vo,
            )
            for failing in expected
        ]
        results = await self.submit(*parcels)
        refused = [r.reason for r in results if r.disposition != ACCEPTED]
        _expect(not refused, f"a failing data parcel was refused: {'; '.join(refused)}")
        outcomes = await asyncio.gather(*(self.outcome(r.identifier) for r in results))
        if NO_LOGS in self.declared.limitations and any(o.result != FAILED for o in outcomes):
            ended = ", ".join(_result(o) for o in outcomes)
            return f"runs nothing (declares no logs): the failing requests ended {ended}"
        for failing, outcome in zip(expected, outcomes, strict=True):
            name = common_pb2.FailureClass.Name(failing.failure_class)
            _expect(outcome.result == FAILED, f"{failing.lfn}: {_result(outcome)}, not FAILED")
            failure = outcome.failure
            _expect(
                failure.failure_class == failing.failure_class,
                f"{failing.lfn}: class "
                f"{common_pb2.FailureClass.Name(failure.failure_class)}, not {name}",
            )
            _expect(
                (failure.lfn, failure.storage_element) == (failing.lfn, failing.storage_element),
                f"the failure names {failure.lfn!r} at {failure.storage_element!r}, not "
                f"{failing.lfn!r} at {failing.storage_element!r}",
            )
            _expect(
                failing.words in failure.tool_message,
                f"{failing.lfn}: the message {failure.tool_message!r} lacks {failing.words!r}",
            )
        return "; ".join(
            f"{common_pb2.FailureClass.Name(f.failure_class)} at {f.storage_element}, {f.words!r}"
            for f in expected
        )

    async def push_mode(self) -> str:
        dispatcher = self.target.dispatcher
        if self.declared.report_mode == backend_pb2.REPORT_MODE_PULL:
            if dispatcher is None:
                return "pull mode: outcomes reach the dispatcher through Poll"
            self.runs_the_check_parcels()
            identifier = await self.accepted(await self.parcel())
            await self.outcome(identifier)
            _expect(not dispatcher.reports_of(identifier), "pull mode, yet it pushed an outcome")
            return "pull mode: outcomes through Poll, none pushed"
        if dispatcher is None:
            raise Skipped("push mode: no dispatcher stand-in to push to (--dispatcher-listen)")
        self.runs_the_check_parcels()
        parcel = await self.parcel()
        identifier = await self.accepted(parcel)
        wait = self.timeout_s
        _expect(
            await dispatcher.pushed(identifier, 1, wait) is not None,
            f"no outcome of {identifier} pushed within {wait:g}s",
        )
        pushes = await dispatcher.pushed(identifier, 2, wait)
        if pushes is None:
            raise Failed(f"its outcome, answered UNKNOWN_PARCEL, was not pushed again in {wait:g}s")
        backend, outcome = pushes[1]
        _expect(backend == self.declared.name, f"pushed as {backend!r}, not {self.declared.name!r}")
        _expect(
            (outcome.parcel_id, outcome.identifier) == (parcel.parcel_id, identifier),
            "the pushed outcome names another parcel or identifier",
        )
        _expect(outcome.result != common_pb2.OUTCOME_RESULT_UNSPECIFIED, "pushed with no result")
        return (
            f"push mode: the outcome ({_result(outcome)}) pushed to ReportOutcomes, and pushed "
            "again while the dispatcher did not know it"
        )

    async def capacity(self) -> str:
        self.runs_the_check_parcels()
        capacity = self.declared.capacity
        if capacity == 0:
            results = await self.submit(*[await self.parcel() for _ in range(3)])
            _expect(
                all(r.disposition == ACCEPTED for r in results),
                "declares no capacity limit, yet refused a Submit of three parcels",
            )
            await asyncio.gather(*(self.outcome(r.identifier) for r in results))
            return "declares no limit: three parcels at once accepted"
        if capacity > MOST_FILLED:
            raise Skipped(f"capacity {capacity}: more parcels than the check fills ({MOST_FILLED})")
        results = await self.submit(*[await self.parcel(LONG) for _ in range(capacity + 1)])
        taken = [r.identifier for r in results if r.disposition == ACCEPTED]
        try:
            refused = [r for r in results if r.disposition == REFUSED]
            _expect(len(taken) <= capacity, f"{len(taken)} accepted at capacity {capacity}")
            _expect(bool(refused), f"{capacity + 1} parcels for capacity {capacity}: none refused")
            _expect(all(r.reason for r in refused), "refused at capacity without a reason")
        finally:
            if taken:
                await self.stub.Cancel(backend_pb2.CancelRequest(identifiers=taken))
                await asyncio.gather(*(self.outcome(identifier) for identifier in taken))
        identifier = await self.accepted(await self.parcel())
        await self.outcome(identifier)
        return f"capacity {capacity}: the parcel beyond it refused, with a reason; room once done"

    async def restart_in_flight(self) -> str:
        if self.target.restart is None:
            raise Skipped("no way to restart the adaptor was given (--restart-command)")
        self.runs_the_check_parcels()
        parcel = await self.parcel(RESTARTED)
        identifier = await self.accepted(parcel)
        forgets = FORGETS_ON_RESTART in self.declared.limitations
        if not forgets and not await self.still_running(identifier):
            raise Skipped("the parcel ended before the restart")
        await self.target.restart()
        await self.answering()
        if forgets:
            reply = await self.stub.Poll(backend_pb2.PollRequest(identifiers=[identifier]))
            _expect(
                list(reply.unknown_identifiers) == [identifier],
                "declares it forgets on restart, yet knows an identifier from before",
            )
        (again,) = await self.submit(parcel)
        _expect(again.disposition == ACCEPTED, f"its key refused after the restart: {again.reason}")
        if forgets:
            _expect(again.identifier != identifier, "forgot on restart, yet the same identifier")
            await self.outcome(again.identifier)
            return "declares it forgets on restart: the identifier is unknown, the key taken anew"
        _expect(
            again.identifier == identifier,
            f"after the restart its key got another identifier ({again.identifier})",
        )
        outcome = await self.outcome(identifier)
        _expect(outcome.parcel_id == parcel.parcel_id, "the outcome names another parcel")
        return f"a parcel in flight across a restart kept its identifier, ended {_result(outcome)}"


async def check_adaptor(target: Target, *, timeout_s: float = 120.0) -> list[Verdict]:
    """Every property's verdict, in order."""
    conformance = Conformance(target, timeout_s)
    return [await conformance.verdict(name) for name in PROPERTIES]
