"""The null adaptor: accepts at once, runs nothing, finishes as configured (`settings`).

It exists for benchmarks and failure injection, and it keeps its state in memory: a restart forgets
what it accepted (re-submitted parcels are then accepted anew, with a new identifier), and it
writes no logs; Describe declares both (`Limitation`), which the conformance checks hold it to.
Within one run it honours the contract exactly, which is what the dispatcher's tests lean on:
Submit is idempotent per ParcelID, and `submits` / `started` count, per key, every Submit that
named it and every start of work, so a test can prove that no parcel ran twice. The same tallies
are in Describe's counters (which keep counting the jobs `retain_s` made it forget). In push mode
a sweep (`push_once`, on the kernel's `SweepRunner`) reports finished jobs through an
`OutcomeReporter` every `push_interval_s`.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import json
import time
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dxts.backends.logic.adaptor import key_problem
from dxts.backends.null.settings import NullRule, NullSettings, NullUsage
from dxts.core.adaptor.model import (
    CancelledKey,
    CancelResult,
    Description,
    Failure,
    FailureClass,
    JobLogs,
    Limitation,
    Outcome,
    OutcomeAck,
    OutcomeDisposition,
    OutcomeResult,
    OutputFile,
    Payload,
    PollResult,
    ReportMode,
    ResourceUsage,
    Submission,
    SubmitResult,
)
from dxts.core.errors import NotFound
from dxts.core.ids import id_to_str, new_id
from dxts.core.kernel.sweeps import Pacing, Sweep, SweepRunner

SUCCESS, FAILURE, SPLIT, NO_REPORT, LOST = "success", "failure", "split", "no_report", "lost"
NOT_TRIED = "not_tried"  # by rule only: SUCCEEDED, every input reported NOT_TRIED
STOP_GRACE_S = 5.0  # a push in progress at stop: one ReportOutcomes call


@dataclass
class Job:
    parcel_id: str
    identifier: str
    fate: str
    finish_at: float  # time.monotonic()
    input_ids: tuple[str, ...]
    output_prefix: str
    cancelled: bool = False
    pushed: bool = False
    reported_at: float | None = None  # when its outcome first reached the dispatcher
    cancellable: bool = True
    usage: NullUsage | None = None  # what it reports as measured when it finishes
    rule: NullRule | None = None  # the rule that decided its fate, if one did
    requirements: str = ""  # what the dispatcher carried to it (ParcelSubmission.requirements)


def fate_of(parcel_id: str, settings: NullSettings) -> str:
    """The parcel's outcome, drawn from the mix by a stable hash of its id."""
    digest = hashlib.sha256(f"null:{parcel_id}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    for fate, share in (
        (FAILURE, settings.failure),
        (SPLIT, settings.split),
        (NO_REPORT, settings.no_report),
        (LOST, settings.lost),
    ):
        if point < share:
            return fate
        point -= share
    return SUCCESS


class OutcomeReporter(Protocol):
    """Where a push-mode adaptor reports finished work: the dispatcher
    (`edge.dispatcher_client.GrpcOutcomeReporter`)."""

    async def report(self, backend: str, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        """One ack per outcome, in order."""
        ...

    async def close(self) -> None: ...


def carried_inputs(
    parcel: Submission,
) -> Iterator[tuple[dict[str, Any] | None, str | None]]:
    """(descriptor, LFN) of what the parcel carries, as far as the adaptor can see it: the
    parameters' File locations and descriptor texts, and a data request's files."""
    stack: list[Any] = [
        json.loads(text) for text in (parcel.parameters_json, parcel.request_json) if text
    ]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if value.get("class") == "File" and isinstance(value.get("location"), str):
                yield None, value["location"].removeprefix("lfn:")
            elif isinstance(value.get("LFN"), str):
                yield None, value["LFN"]
            else:
                stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and value.startswith("{"):
            with contextlib.suppress(ValueError):
                decoded = json.loads(value)
                if isinstance(decoded, dict):
                    yield decoded, None


def _requirements(parcel: Submission) -> dict[str, Any]:
    try:
        asked = json.loads(parcel.requirements_json) if parcel.requirements_json else {}
    except ValueError:
        return {}
    return asked if isinstance(asked, dict) else {}


class NullAdaptor:
    """An `Adaptor` (`dxts.backends.logic.adaptor`); in push mode it reports through `reporter`."""

    def __init__(
        self, settings: NullSettings | None = None, *, reporter: OutcomeReporter | None = None
    ) -> None:
        self.settings = settings or NullSettings()
        self.jobs: dict[str, Job] = {}  # by ParcelID
        self.by_identifier: dict[str, Job] = {}
        self.cancelled_keys: set[str] = set()  # cancelled before they were ever accepted
        self.submits: Counter[str] = Counter()  # Submits naming each key
        self.started: Counter[str] = Counter()  # starts of work per key: must never exceed 1
        self.refusals = 0
        self.rule_hits: Counter[int] = Counter()  # parcels each rule (by index) decided
        # What is in flight, kept as jobs come and go (a scan of every job would grow with
        # the run): the finishing times still ahead, the ones among them cancelled, and the
        # lost jobs (which never finish) not cancelled.
        self._finishing: list[tuple[float, str]] = []
        self._cancelled_early: set[str] = set()
        self._lost: set[str] = set()
        # The jobs whose outcome was reported (polled, or pushed and acknowledged), in that
        # order with when, for `retain_s`; and the tallies of the jobs forgotten, which Describe
        # keeps counting.
        self._reported: deque[tuple[float, str]] = deque()
        self._forgotten: Counter[str] = Counter()
        self._reporter = reporter
        self._pusher: SweepRunner | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self.settings.report_mode == "push" and self._pusher is None:
            assert self._reporter is not None, "a push-mode null adaptor needs a reporter"
            interval = self.settings.push_interval_s
            self._pusher = SweepRunner(
                [Sweep("null-push", self.push_once, Pacing(interval, first_idle_s=interval))]
            )
            self._pusher.start()

    async def stop(self) -> None:
        if self._pusher is not None:
            await self._pusher.stop(grace_s=STOP_GRACE_S)
            self._pusher = None
        if self._reporter is not None:
            await self._reporter.close()

    # -- the contract -------------------------------------------------------------------------

    def _in_flight(self) -> int:
        now = time.monotonic()
        while self._finishing and self._finishing[0][0] <= now:
            _, key = heapq.heappop(self._finishing)
            self._cancelled_early.discard(key)
        self._forget_old(now)
        return len(self._finishing) - len(self._cancelled_early) + len(self._lost)

    def _reported_now(self, job: Job, now: float) -> None:
        """The job's outcome reached the dispatcher (first time only): `retain_s` runs from
        here, so a job is never forgotten before anyone heard how it ended."""
        if job.reported_at is None:
            job.reported_at = now
            self._reported.append((now, job.parcel_id))

    def _forget_old(self, now: float) -> None:
        """Forget the jobs whose outcome was reported `retain_s` ago or more."""
        retain_s = self.settings.retain_s
        if retain_s is None:
            return
        while self._reported and self._reported[0][0] + retain_s <= now:
            _, key = self._reported.popleft()
            job = self.jobs.get(key)
            if job is None:
                continue
            del self.jobs[key]
            del self.by_identifier[job.identifier]
            submits, starts = self.submits.pop(key, 0), self.started.pop(key, 0)
            self._forgotten.update(
                accepted=1, submits=submits, started=starts, repeated_submits=max(submits - 1, 0)
            )

    def _cancel(self, job: Job) -> None:
        job.cancelled = True
        if job.parcel_id in self._lost:
            self._lost.discard(job.parcel_id)
        else:
            self._cancelled_early.add(job.parcel_id)

    def _finished(self, job: Job, now: float) -> bool:
        return job.cancelled or (job.fate != LOST and now >= job.finish_at)

    async def describe(self) -> Description:
        in_flight = self._in_flight()
        return Description(
            name=self.settings.name,
            kind=self.settings.kind,
            report_mode=ReportMode.PUSH if self.settings.report_mode == "push" else ReportMode.PULL,
            capacity=self.settings.capacity,
            version="null-1",
            counters={
                "submits": sum(self.submits.values()) + self._forgotten["submits"],
                "accepted": len(self.jobs) + self._forgotten["accepted"],
                "started": sum(self.started.values()) + self._forgotten["started"],
                "repeated_submits": sum(n - 1 for n in self.submits.values() if n > 1)
                + self._forgotten["repeated_submits"],
                "refused": self.refusals,
                "in_flight": in_flight,
            },
            limitations=frozenset({Limitation.NO_LOGS, Limitation.FORGETS_ON_RESTART}),
        )

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        results = []
        now = time.monotonic()
        in_flight = self._in_flight()
        for parcel in parcels:
            key = parcel.parcel_id
            problem = key_problem(key)
            if problem is not None:
                results.append(SubmitResult.refused(key, problem))
                continue
            self.submits[key] += 1
            job = self.jobs.get(key)
            if job is not None:
                results.append(SubmitResult.accepted(key, job.identifier))
            elif key in self.cancelled_keys:
                results.append(SubmitResult.refused(key, "cancelled before it was accepted"))
            elif self.settings.capacity and in_flight >= self.settings.capacity:
                self.refusals += 1
                results.append(
                    SubmitResult.refused(key, f"at capacity ({self.settings.capacity} in flight)")
                )
            else:
                rule = self._ruled(parcel)
                delay = self.settings.delay_s
                if rule is not None and rule.delay_s is not None:
                    delay = rule.delay_s
                job = Job(
                    key,
                    id_to_str(new_id()),
                    rule.fate if rule is not None else fate_of(key, self.settings),
                    now + delay,
                    tuple(parcel.input_ids),
                    parcel.output_prefix,
                    cancellable=rule is None or rule.cancellable,
                    usage=rule.usage
                    if rule is not None and rule.usage is not None
                    else self.settings.usage,
                    rule=rule,
                    requirements=parcel.requirements_json,
                )
                self.jobs[key] = job
                self.by_identifier[job.identifier] = job
                if job.fate == LOST:
                    self._lost.add(key)
                else:
                    heapq.heappush(self._finishing, (job.finish_at, key))
                self.started[key] += 1
                in_flight += 1
                results.append(SubmitResult.accepted(key, job.identifier))
        return results

    async def poll(self, identifiers: Sequence[str]) -> PollResult:
        now = time.monotonic()
        reply = PollResult()
        for identifier in identifiers:
            job = self.by_identifier.get(identifier)
            if job is None:
                reply.unknown_identifiers.append(identifier)
            elif self._finished(job, now):
                reply.outcomes.append(self.outcome(job))
                self._reported_now(job, now)
        return reply

    async def cancel(self, identifiers: Sequence[str], parcel_ids: Sequence[str]) -> CancelResult:
        reply = CancelResult()
        now = time.monotonic()
        for identifier in identifiers:
            job = self.by_identifier.get(identifier)
            if job is None:
                reply.unknown_identifiers.append(identifier)
            elif not self._finished(job, now) and job.cancellable:
                self._cancel(job)
        for key in parcel_ids:
            job = self.jobs.get(key)
            if job is None:
                self.cancelled_keys.add(key)
                reply.keys.append(CancelledKey(parcel_id=key))
            else:
                if not self._finished(job, now) and job.cancellable:
                    self._cancel(job)
                reply.keys.append(CancelledKey(parcel_id=key, identifier=job.identifier))
        return reply

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs:
        """Nothing ran, so nothing was written: empty logs for a job it knows."""
        if identifier not in self.by_identifier:
            raise NotFound("job", identifier)
        return JobLogs()

    def _ruled(self, parcel: Submission) -> NullRule | None:
        """The first matching rule with uses left (counted), if any."""
        if not self.settings.rules:
            return None
        carried = list(carried_inputs(parcel))
        requirements = _requirements(parcel)
        for index, rule in enumerate(self.settings.rules):
            if rule.times is not None and self.rule_hits[index] >= rule.times:
                continue
            if not rule.applies_to(requirements):
                continue
            if rule.output_prefix is not None:
                matched = rule.output_prefix in parcel.output_prefix
            else:
                matched = any(rule.matches(descriptor, lfn) for descriptor, lfn in carried)
            if matched:
                self.rule_hits[index] += 1
                return rule
        return None

    # -- outcomes -----------------------------------------------------------------------------

    def outcome(self, job: Job) -> Outcome:
        """The terminal outcome of a finished job."""
        outcome = Outcome(
            parcel_id=job.parcel_id,
            backend=self.settings.name,
            identifier=job.identifier,
            backend_status=job.fate,
        )
        if job.cancelled:
            outcome.result = OutcomeResult.CANCELLED
            outcome.backend_status = "cancelled"
            outcome.message = "cancelled on request"
            return outcome
        if job.usage is not None:
            outcome.usage = ResourceUsage(**job.usage.model_dump())
        if job.fate == FAILURE:
            outcome.result = OutcomeResult.FAILED
            outcome.message = "null backend: injected failure"
            outcome.failure = Failure(FailureClass.APPLICATION_ERROR)
            if job.rule is not None:
                outcome.backend_status = job.rule.backend_status or outcome.backend_status
                outcome.message = job.rule.message or outcome.message
                outcome.exit_code = job.rule.exit_code
                outcome.failure = Failure(job.rule.failure_class, job.rule.tool_message)
            return outcome
        outcome.result = OutcomeResult.SUCCEEDED
        if job.fate != NO_REPORT and job.input_ids:
            outcome.status_report_json = json.dumps(self._report(job), sort_keys=True)
        outcome.outputs.extend(
            OutputFile(
                output_name=name,
                lfn=f"{job.output_prefix}/{name}.null",
                size=self.settings.output_size,
                storage_element=self.settings.name,
            )
            for name in self.settings.outputs
        )
        return outcome

    def _report(self, job: Job) -> dict[str, Any]:
        if job.fate != SPLIT:
            action = "NOT_TRIED" if job.fate == NOT_TRIED else "SUCCESS"
            return {input_id: {"action": action} for input_id in job.input_ids}
        parts = self.settings.split_parts
        succeeded = round(parts * self.settings.split_success_fraction)
        report = {}
        for input_id in job.input_ids:
            children = [
                {
                    "lfn": None,
                    "lfn_size": None,
                    "descriptor": {
                        "split_of": input_id,
                        "part": part,
                        "mask": f"{part + 1}/{parts}",
                    },
                }
                for part in range(parts)
            ]
            report[input_id] = {
                "action": "SPLIT",
                "SUCCESS": children[:succeeded],
                "FAILURE": children[succeeded:],
            }
        return report

    # -- the push path ------------------------------------------------------------------------

    async def push_once(self) -> int:
        """Report the finished jobs not yet acknowledged; returns how many were acknowledged.
        An outcome the dispatcher does not know yet (it has not recorded the identifier) is
        pushed again next time."""
        now = time.monotonic()
        due = [j for j in self.jobs.values() if not j.pushed and self._finished(j, now)]
        if not due:
            return 0
        assert self._reporter is not None
        acks = await self._reporter.report(self.settings.name, [self.outcome(job) for job in due])
        done = 0
        for job, ack in zip(due, acks, strict=True):
            if ack.disposition is not OutcomeDisposition.UNKNOWN_PARCEL:
                job.pushed = True
                self._reported_now(job, now)
                done += 1
        return done
