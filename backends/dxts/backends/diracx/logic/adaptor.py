"""The DiracX adaptor: each compute parcel becomes one job of a DiracX installation.

Submit: the payload (process tree and resolved hints, shared by the Submit's parcels) and each
parcel's submission travel as input sandboxes (named by `payload`); the JDL's job name
carries the ParcelID and its matching attributes come from the parcel's requirements under the
installation's policy (`jdl`). Exactly once: the adaptor records a parcel's slot (its dxts
identifier, in DiracXIDs) BEFORE it asks DiracX for the job, and before submitting any parcel
without a recorded job it searches DiracX for that parcel's job name — so a crash between
DiracX accepting a job and the adaptor recording it finds the job again instead of making a
second. Submits are serialised within the adaptor (one adaptor process per DiracX identity).
When DiracX cannot be reached Submit fails UNAVAILABLE (the parcels stay Reserved and are
submitted again later, which the search makes safe) rather than refusing them, since a refused
parcel could go to another backend while DiracX holds its job.

Poll: DiracX statuses become outcomes (`OUTCOMES`): Done → SUCCEEDED with the manifest, status
report and measured usage read from the job's output sandbox (DiracX 0.7.0 has no call that
reads job parameters back); Failed → FAILED with DiracX's status, minor and application status
and the payload's own error and exit code (from the output sandbox too); Killed → CANCELLED;
Deleted, Stalled or a job DiracX no longer knows → FAILED as lost (a stalled job is killed
first, so it cannot come back and run beside its retry). A terminal outcome is stored and
answered again without asking DiracX.

Whatever raises for one parcel (its description before DiracX is asked, reading its job's end)
is that parcel's FAILED outcome in the error's own words (`parcel_failure`), never the whole
Submit's or Poll's failure; DiracX being away still fails the call (UNAVAILABLE).

Cancel sets the jobs Killed (DiracX passes the kill to the job's pilot) and remembers it; the
CANCELLED outcome follows through Poll once DiracX says Killed. DiracX ignores a status older
than the job's last one, so a Kill that crossed a pilot's Matched or Running may not take: Poll
sends it again while the job is under way, and a cancelled job that ends Failed (its payload
killed under it) is CANCELLED too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dxts.backends.diracx import payload as worker
from dxts.backends.diracx.logic import jdl, sandbox, search
from dxts.backends.diracx.logic.service import DiracXError, DiracXService
from dxts.backends.diracx.settings import DiracXSettings
from dxts.backends.diracx.store import state
from dxts.backends.logic.adaptor import key_problem, parcel_failure
from dxts.backends.runner.cwl import Collected
from dxts.core.adaptor.codec import encode_payload, encode_submission
from dxts.core.adaptor.model import (
    CancelledKey,
    CancelResult,
    ComputePayload,
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
from dxts.core.errors import NotFound, Unavailable
from dxts.core.ids import id_to_str, new_ids
from dxts.core.states import Kind

log = logging.getLogger(__name__)

SUCCEEDED, FAILED, CANCELLED = (
    OutcomeResult.SUCCEEDED,
    OutcomeResult.FAILED,
    OutcomeResult.CANCELLED,
)
# DiracX job status → what it means for the parcel (statuses not listed are still under way).
DONE, FAILED_STATUS, KILLED, DELETED, STALLED = "Done", "Failed", "Killed", "Deleted", "Stalled"
LOST = (DELETED, STALLED)
SETUP_ERROR = Failure(FailureClass.SETUP_ERROR)  # the payload ran but left no usable result
NO_SITE = ("", "ANY", "Unknown", "None")  # DiracX's Site before a pilot matched the job


class DiracXAdaptor:
    """The `Adaptor` (dxts.backends.logic.adaptor) of one DiracX identity."""

    def __init__(self, settings: DiracXSettings, client: DiracXService) -> None:
        """`client`: DiracX as `settings`' identity (`DiracXClient.for_settings`)."""
        self.settings = settings
        self.client = client
        self.state = state.State(settings.work_dir)
        self.tally: Counter[str] = Counter()  # since this start: submits, jobs_created, found
        self._submitting = asyncio.Lock()

    async def start(self) -> None:
        self.settings.work_dir.mkdir(parents=True, exist_ok=True)
        await self.state.start()

    async def stop(self) -> None:
        await self.state.close()
        await self.client.close()

    # -- the contract -------------------------------------------------------------------------

    async def describe(self) -> Description:
        counts = await self.state.counts()
        return Description(
            name=self.settings.name,
            kind=Kind.COMPUTE,
            report_mode=ReportMode.PULL,
            capacity=self.settings.capacity,
            version="diracx-1",
            counters={
                "submits": self.tally["submits"],
                "accepted": counts["accepted"],
                "started": self.tally["jobs_created"],
                "repeated_submits": self.tally["repeated_submits"],
                "in_flight": counts["accepted"] - counts["finished"],
                "jobs_created": self.tally["jobs_created"],
                "jobs_found_again": self.tally["jobs_found_again"],
                "token_exchanges": self.client.exchanges,
            },
        )

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        results: dict[str, SubmitResult] = {}
        problem = self._payload_problem(payload)
        candidates = []
        for parcel in parcels:
            reason = key_problem(parcel.parcel_id) or problem
            if reason is not None:
                results[parcel.parcel_id] = SubmitResult.refused(parcel.parcel_id, reason)
            else:
                candidates.append(parcel)
        async with self._submitting:
            if candidates:
                assert isinstance(payload, ComputePayload)
                await self._submit(payload, candidates, results)
        return [results[p.parcel_id] for p in parcels]

    def _payload_problem(self, payload: Payload) -> str | None:
        if not isinstance(payload, ComputePayload):
            return "the DiracX adaptor runs compute parcels only"
        if not any(p.process_id == payload.process_id for p in payload.processes):
            return "the compute payload does not hold its root process"
        return None

    async def _submit(
        self,
        payload: ComputePayload,
        parcels: Sequence[Submission],
        results: dict[str, SubmitResult],
    ) -> None:
        keys = [p.parcel_id for p in parcels]
        known = await self.state.by_parcel(keys)
        tombstones = await self.state.tombstoned(keys)
        in_flight = await self.state.in_flight()
        to_place: list[tuple[Submission, str]] = []
        broken: dict[str, str] = {}  # ParcelID → why it cannot become a job
        for parcel in parcels:
            key = parcel.parcel_id
            self.tally["submits"] += 1
            job = known.get(key)
            if job is not None and job.job_id is not None:
                self.tally["repeated_submits"] += 1
                results[key] = SubmitResult.accepted(key, job.slot_id)
                continue
            if key in tombstones:
                results[key] = SubmitResult.refused(key, "cancelled before it was accepted")
                continue
            if job is None and self.settings.capacity and in_flight >= self.settings.capacity:
                results[key] = SubmitResult.refused(
                    key, f"at capacity ({self.settings.capacity} in flight)"
                )
                continue
            try:
                self._description(parcel, [])  # refused now if its requirements cannot be met
            except jdl.RequirementsProblem as error:
                results[key] = SubmitResult.refused(key, str(error))
                continue
            except Exception as error:  # whatever broke, this parcel's outcome says it
                broken[key] = parcel_failure(error)
            if job is None:
                in_flight += 1
            to_place.append((parcel, job.slot_id if job is not None else ""))
        fresh = iter(id_to_str(i) for i in new_ids(len(to_place)))
        new_slots = {p.parcel_id: next(fresh) for p, slot in to_place if not slot}
        await self.state.reserve(new_slots)
        slots = {p.parcel_id: slot or new_slots[p.parcel_id] for p, slot in to_place}
        if broken:
            await self._not_placed(broken, slots, results)
            to_place = [(p, slot) for p, slot in to_place if p.parcel_id not in broken]
        try:
            await self._place(payload, [p for p, _ in to_place])
        except DiracXError as error:
            if error.status != 400:
                raise Unavailable(f"DiracX: {error}") from None
            # DiracX refused the descriptions (no job was made): refused, not retried as is.
            placed = await self.state.by_parcel(list(slots))
            for parcel, _ in to_place:
                if placed[parcel.parcel_id].job_id is None:
                    results[parcel.parcel_id] = SubmitResult.refused(
                        parcel.parcel_id, f"DiracX: {error}"
                    )
        for parcel, _ in to_place:
            if parcel.parcel_id not in results:
                results[parcel.parcel_id] = SubmitResult.accepted(
                    parcel.parcel_id, slots[parcel.parcel_id]
                )

    async def _not_placed(
        self, broken: dict[str, str], slots: dict[str, str], results: dict[str, SubmitResult]
    ) -> None:
        """Accept the parcels that broke before DiracX was asked, each with its FAILED outcome
        in the error's own words (answered by the next Poll): never a Submit failed whole for
        one parcel, nor a parcel left with no end."""
        unsubmitted = [state.Job(key, slots[key], None, None) for key in broken]  # no JobID
        await self.state.finish(
            [
                self._ended(job, FAILED, "NOT_SUBMITTED", words, failure=SETUP_ERROR)
                for job, words in zip(unsubmitted, broken.values(), strict=True)
            ]
        )
        for key in broken:
            results[key] = SubmitResult.accepted(key, slots[key])

    def _description(self, parcel: Submission, sandboxes: list[str]) -> str:
        requirements = json.loads(parcel.requirements_json) if parcel.requirements_json else {}
        if not isinstance(requirements, dict):
            raise jdl.RequirementsProblem("the requirements are not a JSON object")
        return jdl.job_description(
            parcel.parcel_id,
            requirements,
            sandboxes,
            command=self.settings.payload_command,
            environment=self.settings.payload_environment,
            policy=self.settings.policy,
        )

    async def _place(self, payload: ComputePayload, parcels: Sequence[Submission]) -> None:
        """Give every parcel its DiracX job: found again by its name, or submitted now; each
        JobID is recorded as soon as DiracX gives it."""
        if not parcels:
            return
        found = await search.jobs_named(self.client, [p.parcel_id for p in parcels])
        await self.state.record_jobs(found)
        self.tally["jobs_found_again"] += len(found)
        rest = [p for p in parcels if p.parcel_id not in found]
        if not rest:
            return
        shared = await self.client.upload_sandbox(
            sandbox.pack({worker.PAYLOAD_FILE: encode_payload(payload)})
        )
        for chunk in search.chunks(rest, self.settings.batch):
            descriptions = []
            for parcel in chunk:
                own = await self.client.upload_sandbox(
                    sandbox.pack({worker.PARCEL_FILE: encode_submission(parcel)})
                )
                descriptions.append(self._description(parcel, [shared, own]))
            job_ids = await self.client.submit(descriptions)
            await self.state.record_jobs(
                {p.parcel_id: j for p, j in zip(chunk, job_ids, strict=True)}
            )
            self.tally["jobs_created"] += len(job_ids)

    async def poll(self, identifiers: Sequence[str]) -> PollResult:
        jobs = await self.state.by_slot(list(identifiers))
        reply = PollResult(unknown_identifiers=[i for i in identifiers if i not in jobs])
        pending = {j.job_id: j for j in jobs.values() if j.outcome is None and j.job_id is not None}
        reply.outcomes.extend(j.outcome for j in jobs.values() if j.outcome is not None)
        if not pending:
            return reply
        try:
            statuses = await search.statuses(self.client, list(pending))
            cancelled = await self.state.kills_requested(list(pending))
            fresh, kill_again = [], []
            for job_id, job in pending.items():
                outcome = await self._read(job, statuses.get(job_id), job_id in cancelled)
                if outcome is not None:
                    fresh.append(outcome)
                elif job_id in cancelled:
                    kill_again.append(job_id)
            if kill_again:
                await self.client.set_status(kill_again, KILLED, "cancelled by dxts")
        except DiracXError as error:
            raise Unavailable(f"DiracX: {error}") from None
        await self.state.finish(fresh)
        reply.outcomes.extend(fresh)
        return reply

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs:
        """DiracX keeps a job's stdout and stderr in its output sandbox, which this adaptor
        reads only for the status report: the logs name the DiracX job whose sandbox to read."""
        jobs = await self.state.by_slot([identifier])
        if identifier not in jobs:
            raise NotFound("job", identifier)
        job_id = jobs[identifier].job_id
        if job_id is None:
            return JobLogs(sandbox="not submitted to DiracX yet")
        return JobLogs(sandbox=f"the output sandbox of DiracX job {job_id}")

    async def _read(
        self, job: state.Job, status: dict[str, Any] | None, cancelled: bool
    ) -> Outcome | None:
        """`_outcome`, and whatever raises reading one job's end (but DiracX being away) that
        job's FAILED outcome in the error's own words: the Poll answers for the others."""
        try:
            return await self._outcome(job, status, cancelled=cancelled)
        except DiracXError:
            raise
        except Exception as error:
            words = parcel_failure(error)
            said = str((status or {}).get("Status"))
            message = f"DiracX job {job.job_id} {said}; its outcome cannot be read: {words}"
            return self._ended(job, FAILED, said, message, failure=Failure(tool_message=words))

    async def _outcome(
        self, job: state.Job, status: dict[str, Any] | None, *, cancelled: bool
    ) -> Outcome | None:
        """The terminal outcome DiracX's status means, or None while the job is under way; a
        failure names the site the job ran at."""
        outcome = await self._judged(job, status, cancelled=cancelled)
        site = str((status or {}).get("Site") or "")
        if outcome is not None and outcome.failure is not None and site not in NO_SITE:
            outcome.failure = dataclasses.replace(outcome.failure, site=site)
        return outcome

    async def _judged(
        self, job: state.Job, status: dict[str, Any] | None, *, cancelled: bool
    ) -> Outcome | None:
        assert job.job_id is not None
        if status is None:
            return self._ended(
                job,
                FAILED,
                "Unknown",
                f"lost: DiracX no longer knows job {job.job_id}",
                failure=Failure(FailureClass.LOST),
            )
        name = str(status.get("Status"))
        said = f"{name}: {status.get('MinorStatus') or ''}".rstrip(": ")
        application = status.get("ApplicationStatus")
        if application and application != "Unknown":
            said = f"{said} ({application})"
        if name == DONE:
            return await self._done(job, said)
        if name == FAILED_STATUS and cancelled:
            return self._ended(job, CANCELLED, said, f"DiracX job {job.job_id} {said} (cancelled)")
        if name == FAILED_STATUS:
            error, exit_code, failure = await self._payload_failure(job.job_id)
            message = f"DiracX job {job.job_id} {said}" + (f": {error}" if error else "")
            return self._ended(job, FAILED, said, message, exit_code=exit_code, failure=failure)
        if name == KILLED:
            return self._ended(job, CANCELLED, said, f"DiracX job {job.job_id} {said}")
        if name in LOST:
            if name == STALLED:
                await self.client.set_status([job.job_id], KILLED, "stalled: killed by dxts")
            return self._ended(
                job,
                FAILED,
                said,
                f"lost: DiracX job {job.job_id} {said}",
                failure=Failure(FailureClass.LOST),
            )
        return None

    async def _result(self, job_id: int) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for pfn in await self.client.job_sandboxes(job_id, "output"):
            files.update(sandbox.unpack(await self.client.download_sandbox(pfn)))
        return files

    async def _payload_failure(self, job_id: int) -> tuple[str, int | None, Failure]:
        """The payload's own account of a failure, the failed tool's exit status and the
        failure's class, when its output sandbox holds them (else the payload never ran to
        the end: killed on its worker)."""
        try:
            files = await self._result(job_id)
            result = worker.read_result(files[worker.RESULT_FILE].decode())
        except (DiracXError, KeyError, ValueError, UnicodeDecodeError):
            return "", None, Failure(FailureClass.KILLED)
        return result.error, result.exit_code, result.failure or Failure(FailureClass.SETUP_ERROR)

    async def _done(self, job: state.Job, said: str) -> Outcome:
        assert job.job_id is not None
        files = await self._result(job.job_id)
        text = files.get(worker.RESULT_FILE)
        if text is None:
            message = f"DiracX job {job.job_id} is Done without {worker.RESULT_FILE}"
            return self._ended(job, FAILED, said, message, failure=SETUP_ERROR)
        try:
            result = worker.read_result(text.decode())
        except (ValueError, UnicodeDecodeError) as problem:
            message = f"DiracX job {job.job_id}: {problem}"
            return self._ended(job, FAILED, said, message, failure=SETUP_ERROR)
        if result.error:
            return self._ended(
                job,
                FAILED,
                said,
                result.error,
                usage=result.usage,
                exit_code=result.exit_code,
                failure=result.failure or SETUP_ERROR,
            )
        return self._ended(job, SUCCEEDED, said, "", collected=result.collected, usage=result.usage)

    def _ended(
        self,
        job: state.Job,
        result: OutcomeResult,
        backend_status: str,
        message: str,
        *,
        collected: Collected | None = None,
        usage: ResourceUsage | None = None,
        exit_code: int | None = None,
        failure: Failure | None = None,
    ) -> Outcome:
        return Outcome(
            parcel_id=job.parcel_id,
            backend=self.settings.name,
            identifier=job.slot_id,
            result=result,
            outputs=list(collected.outputs) if collected else [],
            status_report_json=collected.report if collected else "",
            output_object_json=collected.output_object_json if collected else "",
            backend_status=backend_status[:200],
            message=message,
            finished_at=datetime.now(UTC),
            usage=usage,
            exit_code=exit_code,
            failure=failure,
        )

    async def cancel(self, identifiers: Sequence[str], parcel_ids: Sequence[str]) -> CancelResult:
        by_slot = await self.state.by_slot(list(identifiers))
        reply = CancelResult(unknown_identifiers=[i for i in identifiers if i not in by_slot])
        async with self._submitting:
            by_key = await self.state.by_parcel(list(parcel_ids))
            unplaced = [k for k, j in by_key.items() if j.job_id is None]
            try:
                found = await search.jobs_named(self.client, unplaced) if unplaced else {}
            except DiracXError as error:
                raise Unavailable(f"DiracX: {error}") from None
            await self.state.record_jobs(found)
            by_key = await self.state.by_parcel(list(parcel_ids))
            await self.state.tombstone(
                [k for k in parcel_ids if k not in by_key or by_key[k].job_id is None]
            )
        for key in parcel_ids:
            job = by_key.get(key)
            placed = job is not None and job.job_id is not None
            reply.keys.append(
                CancelledKey(parcel_id=key, identifier=job.slot_id if job and placed else "")
            )
        to_kill = sorted(
            {
                j.job_id
                for j in [*by_slot.values(), *by_key.values()]
                if j.job_id is not None and j.outcome is None
            }
        )
        if to_kill:
            await self.state.request_kills(to_kill)
            try:
                await self.client.set_status(to_kill, KILLED, "cancelled by dxts")
            except DiracXError as error:
                raise Unavailable(f"DiracX: {error}") from None
        return reply
