"""The local adaptor: runs compute parcels with cwltool and data requests between local storage
elements, on this machine, in a bounded pool of workers (`settings.workers`).

Submit records every accepted parcel in the adaptor's own SQLite state (`state`) before it
answers, so it is idempotent across restarts: a key accepted once keeps its identifier, and
only a queued job is ever started (a conditional queued → running update), so no parcel runs
twice. On start, jobs left queued are queued again, and jobs left running by a previous process
(whose runner died with it, or is killed now) end FAILED: they did not finish, and running them
again could repeat what they had already done.

Cancel is real: a queued job ends CANCELLED without starting, a running one has its process
group terminated (SIGTERM, then SIGKILL after the grace period) and ends CANCELLED.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dxts.backends.local import compute, data, state
from dxts.backends.local.compute import JobFailed, Run
from dxts.backends.local.settings import LocalSettings
from dxts.backends.server import AdaptorServicer, accepted, key_problem, refused
from dxts.core.catalogue import FileCatalogue
from dxts.core.grpc.convert import enum_to_proto, to_timestamp
from dxts.core.ids import id_to_str, new_ids
from dxts.v1 import backend_pb2, common_pb2

log = logging.getLogger(__name__)

RESULTS = {
    state.SUCCEEDED: common_pb2.OUTCOME_RESULT_SUCCEEDED,
    state.FAILED: common_pb2.OUTCOME_RESULT_FAILED,
    state.CANCELLED: common_pb2.OUTCOME_RESULT_CANCELLED,
}


class LocalAdaptor(AdaptorServicer):
    def __init__(self, settings: LocalSettings, catalogue: FileCatalogue | None = None) -> None:
        self.settings = settings
        self.catalogue = catalogue
        self.state = state.State(f"sqlite+aiosqlite:///{settings.work_dir / 'state.sqlite'}")
        self.submits: Counter[str] = Counter()  # Submits naming each key, since this start
        self.started: Counter[str] = Counter()  # jobs started per key, since this start
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._runs: dict[str, Run] = {}
        self._background: set[asyncio.Task[None]] = set()

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        (self.settings.work_dir / "jobs").mkdir(parents=True, exist_ok=True)
        assert self.settings.storage_root is not None
        for se in self.settings.storage_elements:
            (self.settings.storage_root / se).mkdir(parents=True, exist_ok=True)
        await self.state.start()
        for job in await self.state.jobs_in([state.RUNNING]):
            _kill_leftover(job.process_group)
            await self.state.finish(
                job.parcel_id,
                state.FAILED,
                self._outcome(
                    job, state.FAILED, message="interrupted by a restart of the local backend"
                ),
            )
        for job in await self.state.jobs_in([state.QUEUED]):
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
        await self.state.close()

    # -- the contract -------------------------------------------------------------------------

    async def Describe(
        self, request: backend_pb2.DescribeRequest, context: Any
    ) -> backend_pb2.DescribeResponse:
        counts = await self.state.counts()
        return backend_pb2.DescribeResponse(
            name=self.settings.name,
            kind=enum_to_proto(self.settings.kind),  # type: ignore[arg-type]
            report_mode=backend_pb2.REPORT_MODE_PULL,
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

    async def Submit(
        self, request: backend_pb2.SubmitRequest, context: Any
    ) -> backend_pb2.SubmitResponse:
        results: list[backend_pb2.SubmitResult | None] = []
        valid = []
        for parcel in request.parcels:
            problem = key_problem(parcel.parcel_id)
            if problem is not None:
                results.append(refused(parcel.parcel_id, problem))
                continue
            kind_problem = self._payload_problem(request.payload, parcel)
            if kind_problem is not None:
                results.append(refused(parcel.parcel_id, kind_problem))
                continue
            self.submits[parcel.parcel_id] += 1
            valid.append(parcel)
            results.append(None)
        answers = iter(
            await self.state.accept(
                request.payload,
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
                results[index] = refused(parcel_id, reason or "refused")
                continue
            results[index] = accepted(parcel_id, identifier)
            if new:
                self._queue.put_nowait(parcel_id)
        return backend_pb2.SubmitResponse(results=[r for r in results if r is not None])

    def _payload_problem(
        self, payload: backend_pb2.Payload, parcel: backend_pb2.ParcelSubmission
    ) -> str | None:
        if payload.HasField("compute"):
            root = payload.compute.process_id
            if not any(p.process_id == root for p in payload.compute.processes):
                return "the compute payload does not hold its root process"
            return None
        if payload.HasField("data"):
            return None if parcel.request_json else "a data parcel without a request"
        return "no payload"

    async def Poll(
        self, request: backend_pb2.PollRequest, context: Any
    ) -> backend_pb2.PollResponse:
        found = {
            job.identifier: job
            for job in await self.state.jobs_by(identifiers=list(request.identifiers))
        }
        reply = backend_pb2.PollResponse()
        for identifier in request.identifiers:
            job = found.get(identifier)
            if job is None:
                reply.unknown_identifiers.append(identifier)
            elif job.outcome is not None:
                reply.outcomes.append(job.outcome)
        return reply

    async def Cancel(
        self, request: backend_pb2.CancelRequest, context: Any
    ) -> backend_pb2.CancelResponse:
        reply = backend_pb2.CancelResponse()
        by_identifier = {
            job.identifier: job
            for job in await self.state.jobs_by(identifiers=list(request.identifiers))
        }
        by_key = {
            job.parcel_id: job
            for job in await self.state.jobs_by(parcel_ids=list(request.parcel_ids))
        }
        reply.unknown_identifiers.extend(i for i in request.identifiers if i not in by_identifier)
        never = [p for p in request.parcel_ids if p not in by_key]
        await self.state.tombstone(never)
        for key in request.parcel_ids:
            job = by_key.get(key)
            reply.keys.append(
                backend_pb2.CancelledKey(parcel_id=key, identifier=job.identifier if job else "")
            )
        for job in [*by_identifier.values(), *by_key.values()]:
            await self._cancel(job)
        return reply

    async def _cancel(self, job: state.Job) -> None:
        if job.state in state.TERMINAL:
            return
        await self.state.request_cancel([job.parcel_id])
        run = self._runs.get(job.parcel_id)
        if run is not None:
            task = asyncio.create_task(compute.kill(run, self.settings.kill_grace_s))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        elif job.state == state.QUEUED:
            await self.state.finish(
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
            except Exception:
                log.exception("running parcel %s failed unexpectedly", parcel_id)

    async def _execute(self, parcel_id: str) -> None:
        run = Run()
        self._runs[parcel_id] = run
        try:
            if not await self.state.start_job(parcel_id):
                return  # cancelled while queued
            self.started[parcel_id] += 1
            (job,) = await self.state.jobs_by(parcel_ids=[parcel_id])
            run.cancelled = run.cancelled or job.cancel_requested
            payload = await self.state.payload(job.payload_key)
            job_dir = self.settings.work_dir / "jobs" / job.identifier
            job_dir.mkdir(parents=True, exist_ok=True)
            outputs: list[common_pb2.OutputFile] = []
            report = ""
            try:
                if run.cancelled:
                    pass
                elif payload.HasField("compute"):
                    outputs, report = await compute.run_compute(
                        job_dir,
                        payload.compute,
                        job.submission,
                        self.settings,
                        self.catalogue,
                        run,
                        lambda group: self.state.set_process_group(parcel_id, group),
                    )
                else:
                    await data.run_request(
                        json.loads(job.submission.request_json), self.settings, self.catalogue
                    )
            except JobFailed as error:
                if not run.cancelled:
                    await self.state.finish(
                        parcel_id,
                        state.FAILED,
                        self._outcome(job, state.FAILED, str(error), usage=run.usage),
                    )
                    return
            ended = state.CANCELLED if run.cancelled else state.SUCCEEDED
            await self.state.finish(
                parcel_id,
                ended,
                self._outcome(
                    job,
                    ended,
                    "cancelled on request" if run.cancelled else "",
                    outputs=outputs,
                    report=report,
                    usage=run.usage,
                ),
            )
        except asyncio.CancelledError:
            await compute.kill(run, 0)
            raise
        finally:
            self._runs.pop(parcel_id, None)

    def _outcome(
        self,
        job: state.Job,
        ended: str,
        message: str = "",
        *,
        outputs: list[common_pb2.OutputFile] | None = None,
        report: str = "",
        usage: common_pb2.ResourceUsage | None = None,
    ) -> common_pb2.Outcome:
        """The job's outcome; `usage` is what its run used, when it was measured."""
        return common_pb2.Outcome(
            parcel_id=job.parcel_id,
            backend=self.settings.name,
            identifier=job.identifier,
            result=RESULTS[ended],
            outputs=outputs or [],
            status_report_json=report,
            backend_status=ended,
            message=message,
            finished_at=to_timestamp(datetime.now(UTC)),
            usage=usage,
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
