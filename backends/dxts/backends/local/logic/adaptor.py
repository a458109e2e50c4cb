"""The local adaptor: runs compute parcels with cwltool and data requests between local storage
elements, on this machine, in a bounded pool of workers (`settings.workers`).

Submit records every accepted parcel in the adaptor's own SQLite state (`store.state`) before it
answers, so it is idempotent across restarts: a key accepted once keeps its identifier, and
only a queued job is ever started (a conditional queued → running update), so no parcel runs
twice. On start, jobs left queued are queued again, and jobs left running by a previous process
(whose runner died with it, or is killed now) end FAILED: they did not finish, and running them
again could repeat what they had already done.

Cancel is real: a queued job ends CANCELLED without starting, a running compute job has its
process group terminated (SIGTERM, then SIGKILL after the grace period), a running data request
is stopped where it is (its copies' process killed: a server keeps no partial file, and nothing
not whole is registered), and either ends CANCELLED.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from dxts.backends.local.logic import data
from dxts.backends.local.settings import LocalSettings
from dxts.backends.local.store import state
from dxts.backends.logic.adaptor import directory_logs, key_problem, parcel_failure
from dxts.backends.runner import cwl, requirements, sandbox
from dxts.backends.runner.cwl import JobFailed, Run
from dxts.core.adaptor.model import (
    CancelledKey,
    CancelResult,
    ComputePayload,
    DataPayload,
    Description,
    Failure,
    FailureClass,
    JobLogs,
    Outcome,
    OutcomeResult,
    Payload,
    PollResult,
    ReportMode,
    ResourceUsage,
    Submission,
    SubmitResult,
)
from dxts.core.catalogue import FileCatalogue
from dxts.core.errors import NotFound
from dxts.core.ids import id_to_str, new_ids
from dxts.core.lfn import FileNamespace
from dxts.core.states import Kind

log = logging.getLogger(__name__)

RESULTS = {
    state.SUCCEEDED: OutcomeResult.SUCCEEDED,
    state.FAILED: OutcomeResult.FAILED,
    state.CANCELLED: OutcomeResult.CANCELLED,
}


def _nothing() -> None:
    """Nobody to tell (see LocalAdaptor.finished)."""


class LocalAdaptor:
    """An `Adaptor` (`dxts.backends.logic.adaptor`) running parcels on this machine."""

    def __init__(self, settings: LocalSettings, catalogue: FileCatalogue | None = None) -> None:
        self.settings = settings
        self.catalogue = catalogue
        self.namespace = FileNamespace()  # whose files a data parcel may touch (DXTS_FILES_*)
        self.store = state.State(settings.work_dir)
        self.submits: Counter[str] = Counter()  # Submits naming each key, since this start
        self.started: Counter[str] = Counter()  # jobs started per key, since this start
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._runs: dict[str, Run] = {}
        self._requests: dict[str, asyncio.Task[data.RequestReport]] = {}  # data parcels running
        self._background: set[asyncio.Task[None]] = set()
        self.box: sandbox.Box | None = None  # how compute jobs are confined (set at start)
        # Told each time a job ends: in one process with the dispatcher (`dxts up`) it wakes the
        # poll that collects the outcome instead of letting it sleep out its interval.
        self.finished: Callable[[], None] = _nothing

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self.settings.kind is Kind.COMPUTE:
            self.box = sandbox.confinement(
                self.settings.sandbox,
                self.settings.job_user,
                self.settings.sandbox_network,
                self.settings.sandbox_paths,
                self.settings.runner,
            )
        (self.settings.work_dir / "jobs").mkdir(parents=True, exist_ok=True)
        assert self.settings.storage_root is not None
        for se in self.settings.storage_elements:
            (self.settings.storage_root / se).mkdir(parents=True, exist_ok=True)
        await self.store.start()
        for job in await self.store.jobs_in([state.RUNNING]):
            _kill_leftover(job.process_group)
            await self.store.finish(
                job.parcel_id,
                state.FAILED,
                self._outcome(
                    job,
                    state.FAILED,
                    message="interrupted by a restart of the local backend",
                    failure=Failure(FailureClass.KILLED),
                ),
            )
        for job in await self.store.jobs_in([state.QUEUED]):
            self._queue.put_nowait(job.parcel_id)
        self._workers = [asyncio.create_task(self._worker()) for _ in range(self.settings.workers)]

    async def stop(self) -> None:
        """Stop the workers; a running job's process group is killed (it ends FAILED at the
        next start, see the module docstring)."""
        for task in [*self._workers, *self._background]:
            task.cancel()
        for task in [*self._workers, *self._background]:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._workers = []
        await self.store.close()

    # -- the contract -------------------------------------------------------------------------

    async def describe(self) -> Description:
        counts = await self.store.counts()
        return Description(
            name=self.settings.name,
            kind=self.settings.kind,
            report_mode=ReportMode.PULL,
            capacity=self.settings.capacity,
            version="local-1",
            counters={
                "submits": sum(self.submits.values()),
                "accepted": sum(counts.values()),
                "started": sum(self.started.values()),
                "repeated_submits": sum(n - 1 for n in self.submits.values() if n > 1),
                "in_flight": counts.get(state.QUEUED, 0) + counts.get(state.RUNNING, 0),
                **{f"jobs_{name}": n for name, n in counts.items()},
            },
        )

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        results: list[SubmitResult | None] = []
        valid = []
        for parcel in parcels:
            problem = key_problem(parcel.parcel_id)
            if problem is not None:
                results.append(SubmitResult.refused(parcel.parcel_id, problem))
                continue
            kind_problem = self._payload_problem(payload, parcel)
            if kind_problem is not None:
                results.append(SubmitResult.refused(parcel.parcel_id, kind_problem))
                continue
            self.submits[parcel.parcel_id] += 1
            valid.append(parcel)
            results.append(None)
        answers = iter(
            await self.store.accept(
                payload,
                valid,
                [id_to_str(i) for i in new_ids(len(valid))],
                self.settings.capacity,
            )
            if valid
            else []
        )
        for index, result in enumerate(results):
            if result is not None:
                continue
            parcel_id, identifier, reason, new = next(answers)
            if identifier is None:
                results[index] = SubmitResult.refused(parcel_id, reason or "refused")
                continue
            results[index] = SubmitResult.accepted(parcel_id, identifier)
            if new:
                self._queue.put_nowait(parcel_id)
        return [r for r in results if r is not None]

    def _payload_problem(self, payload: Payload, parcel: Submission) -> str | None:
        if isinstance(payload, ComputePayload):
            root = payload.process_id
            if not any(p.process_id == root for p in payload.processes):
                return "the compute payload does not hold its root process"
            return None
        if isinstance(payload, DataPayload):
            return None if parcel.request_json else "a data parcel without a request"
        return "no payload"

    async def poll(self, identifiers: Sequence[str]) -> PollResult:
        found = {
            job.identifier: job for job in await self.store.jobs_by(identifiers=list(identifiers))
        }
        reply = PollResult()
        for identifier in identifiers:
            job = found.get(identifier)
            if job is None:
                reply.unknown_identifiers.append(identifier)
            elif job.outcome is not None:
                reply.outcomes.append(job.outcome)
        return reply

    async def cancel(self, identifiers: Sequence[str], parcel_ids: Sequence[str]) -> CancelResult:
        reply = CancelResult()
        by_identifier = {
            job.identifier: job for job in await self.store.jobs_by(identifiers=list(identifiers))
        }
        by_key = {
            job.parcel_id: job for job in await self.store.jobs_by(parcel_ids=list(parcel_ids))
        }
        reply.unknown_identifiers.extend(i for i in identifiers if i not in by_identifier)
        never = [p for p in parcel_ids if p not in by_key]
        await self.store.tombstone(never)
        for key in parcel_ids:
            job = by_key.get(key)
            reply.keys.append(CancelledKey(parcel_id=key, identifier=job.identifier if job else ""))
        for job in [*by_identifier.values(), *by_key.values()]:
            await self._cancel(job)
        return reply

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs:
        """The runner's stdout, and the tools' stderr and the runner's log, in the job's
        directory."""
        if not await self.store.jobs_by(identifiers=[identifier]):
            raise NotFound("job", identifier)
        job_dir = self.settings.work_dir / "jobs" / identifier
        return directory_logs(
            job_dir, cwl.RUNNER_STDOUT, cwl.RUNNER_LOG, max_bytes, cwl.TOOL_STDERR
        )

    async def _cancel(self, job: state.Job) -> None:
        if job.state in state.TERMINAL:
            return
        await self.store.request_cancel([job.parcel_id])
        run = self._runs.get(job.parcel_id)
        if run is not None:
            run.cancelled = True  # now: a data request about to start, or ending, sees it
            request = self._requests.get(job.parcel_id)
            if request is not None:
                request.cancel()
            task = asyncio.create_task(cwl.kill(run, self.settings.kill_grace_s))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        elif job.state == state.QUEUED:
            await self.store.finish(
                job.parcel_id,
                state.CANCELLED,
                self._outcome(job, state.CANCELLED, message="cancelled before it started"),
            )

    # -- running ------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            parcel_id = await self._queue.get()
            try:
                await self._execute(parcel_id)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.exception("running parcel %s failed unexpectedly", parcel_id)
                await self._failed_unexpectedly(parcel_id, error)

    async def _failed_unexpectedly(self, parcel_id: str, error: Exception) -> None:
        """End a parcel whose run broke outside the payload (its state, its payload): FAILED
        with the error's words, so it neither stays running nor blocks its cancellation."""
        with contextlib.suppress(Exception):  # the adaptor's own state may be what broke
            (job,) = await self.store.jobs_by(parcel_ids=[parcel_id])
            failed = JobFailed(parcel_failure(error))
            await self.store.finish(
                parcel_id,
                state.FAILED,
                self._outcome(job, state.FAILED, str(failed), failure=failed.failure),
            )

    async def _execute(self, parcel_id: str) -> None:
        run = Run()
        self._runs[parcel_id] = run
        try:
            if not await self.store.start_job(parcel_id):
                return  # cancelled while queued
            self.started[parcel_id] += 1
            (job,) = await self.store.jobs_by(parcel_ids=[parcel_id])
            run.cancelled = run.cancelled or job.cancel_requested
            payload = await self.store.payload(job.payload_key)
            job_dir = self.settings.work_dir / "jobs" / job.identifier
            job_dir.mkdir(parents=True, exist_ok=True)
            collected = cwl.Collected([])
            files_failed = ""
            try:
                if run.cancelled:
                    pass
                elif isinstance(payload, ComputePayload):
                    collected = await cwl.run_compute(
                        job_dir,
                        payload,
                        job.submission,
                        self.settings,
                        self.catalogue,
                        run,
                        lambda group: self.store.set_process_group(parcel_id, group),
                        self._boxed(payload, job.submission),
                    )
                else:
                    collected, files_failed = await self._data(job.submission, run, job_dir)
            except Exception as error:  # whatever broke, this parcel's outcome says it
                failed = error if isinstance(error, JobFailed) else JobFailed(parcel_failure(error))
                if not run.cancelled:
                    await self.store.finish(
                        parcel_id,
                        state.FAILED,
                        self._outcome(
                            job,
                            state.FAILED,
                            str(failed),
                            usage=run.usage,
                            exit_code=failed.exit_code,
                            failure=failed.failure,
                        ),
                    )
                    return
            ended = state.CANCELLED if run.cancelled else state.SUCCEEDED
            await self.store.finish(
                parcel_id,
                ended,
                self._outcome(
                    job,
                    ended,
                    "cancelled on request" if run.cancelled else files_failed,
                    collected=collected,
                    usage=run.usage,
                ),
            )
        except asyncio.CancelledError:
            await cwl.kill(run, 0)
            raise
        finally:
            self._runs.pop(parcel_id, None)
            self.finished()

    async def _data(
        self, submission: Submission, run: Run, job_dir: Path
    ) -> tuple[cwl.Collected, str]:
        """Carry out a data request: a status report of each input's fate and the files that
        failed, in their own words (each file's fate also written as the job's output, for
        GetLogs); JobFailed when every file failed (the first one's class), or some did and
        the request does not say which inputs they stand for. The request runs as a task of
        its own, which Cancel stops (`_cancel`); nothing then is collected."""
        if run.cancelled:
            return cwl.Collected([]), ""
        request = asyncio.create_task(
            data.run_request(
                json.loads(submission.request_json),
                self.settings,
                self.catalogue,
                data.VOFiles(submission.vo, self.namespace),
            )
        )
        self._requests[submission.parcel_id] = request
        try:
            await asyncio.wait([request])
        finally:  # the worker itself stopped (the adaptor stops): so does the request
            if not request.done():
                request.cancel()
                await asyncio.wait([request])
            self._requests.pop(submission.parcel_id, None)
        if request.cancelled():
            return cwl.Collected([]), ""
        report = request.result()
        (job_dir / cwl.RUNNER_STDOUT).write_text(_fates(report))
        status_report = report.status_report()
        if report.failures and (len(report.failures) == len(report.inputs) or not status_report):
            first = next(iter(report.failures.values()))
            raise JobFailed(report.summary(), failure=first.failure)
        text = json.dumps(status_report, sort_keys=True) if status_report else ""
        return cwl.Collected([], report=text), report.summary()

    def _boxed(self, payload: ComputePayload, submission: Submission) -> sandbox.Boxed:
        """The parcel's box and wall time (JobFailed: its requirements cannot be read)."""
        assert self.box is not None
        try:
            limit = requirements.wall_time_s(
                payload,
                submission,
                self.settings.default_wall_time_s,
                self.settings.max_wall_time_s,
            )
        except requirements.BadRequirements as error:
            raise JobFailed(str(error)) from None
        return sandbox.Boxed(self.box, limit)

    def _outcome(
        self,
        job: state.Job,
        ended: str,
        message: str = "",
        *,
        collected: cwl.Collected | None = None,
        usage: ResourceUsage | None = None,
        exit_code: int | None = None,
        failure: Failure | None = None,
    ) -> Outcome:
        """The job's outcome; `usage` is what its run used, when it was measured, and
        `exit_code` the payload's exit status and `failure` its class, when it failed (with
        this adaptor's site, where it ran)."""
        if failure is not None and not failure.site:
            failure = dataclasses.replace(failure, site=self.settings.site)
        return Outcome(
            parcel_id=job.parcel_id,
            backend=self.settings.name,
            identifier=job.identifier,
            result=RESULTS[ended],
            outputs=collected.outputs if collected else [],
            status_report_json=collected.report if collected else "",
            output_object_json=collected.output_object_json if collected else "",
            backend_status=ended,
            message=message,
            finished_at=datetime.now(UTC),
            usage=usage,
            exit_code=exit_code,
            failure=failure,
        )


def _kill_leftover(group: int | None) -> None:
    """Kill the process group a previous process of this adaptor left running, if it is still
    a CWL runner's (a recycled process id must not be killed)."""
    if group is None:
        return
    try:
        command = Path(f"/proc/{group}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (OSError, UnicodeDecodeError):
        return
    if "cwltool" in command:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


def _fates(report: data.RequestReport) -> str:
    """Each file's fate, a line each: a data parcel's log (GetLogs gives it)."""
    failed = report.failures
    return "".join(
        f"failed ({failed[lfn].failure.failure_class.value}): {failed[lfn].message}\n"
        if lfn in failed
        else f"done: {lfn}\n"
        for lfn in report.inputs
    )
