"""The Slurm adaptor: an `Adaptor` (`dxts.backends.logic.adaptor`) running compute parcels as
tasks of Slurm job arrays, served by the shared edge (`dxts.backends.edge`) like every adaptor.

Submit (one lock at a time in this process, so that a Cancel never slips between a decision
and its record): parcels already accepted keep their identifier; new ones are grouped by
resource request (`resources`), up to `array_size` a group, and each group becomes one batch:
its files are prepared on the shared filesystem (`batch.prepare`), the batch and its parcels are
recorded, then one `sbatch --array` submits it and its job id is recorded. The job name is the
batch's (`dxts-<BatchID>`); each task, once it runs, sets its own comment to its parcel id
(`job`), so that every parcel is in Slurm's own records under its id. A batch recorded without
a job id (the adaptor died between the two records) is looked up by name before it is ever
submitted again: the job runs once.

Poll asks `sacct` once for every array the identifiers belong to; a task in a terminal Slurm
state becomes an outcome (recorded, so later Polls do not ask again) with Slurm's state and exit
code as the raw status and the accounting's CPU time, elapsed time and peak memory as its usage.
A task Slurm does not know `lost_after_s` after its submission is reported lost (FAILED).

Whatever raises for one parcel (preparing its files, reading what its task left) is that
parcel's FAILED outcome in the error's own words (`parcel_failure`), never the whole Submit's
or Poll's failure: the other parcels go on, and this one neither stays running nor blocks its
cancellation.

Data parcels are not this adaptor's: they are refused, and go to the local data adaptor.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dxts.backends.logic.adaptor import directory_logs, key_problem, parcel_failure
from dxts.backends.runner.cwl import RUNNER_LOG, RUNNER_STDOUT, TOOL_STDERR, JobFailed
from dxts.backends.runner.sandbox import JobUser
from dxts.backends.slurm.logic import account, batch, outcomes
from dxts.backends.slurm.logic.cluster import WHOLE_ARRAY, SlurmCluster, SlurmError, TaskRecord
from dxts.backends.slurm.logic.resources import BadRequirements, Request, resource_request
from dxts.backends.slurm.settings import SlurmSettings
from dxts.backends.slurm.store.state import NewBatch, NewJob, State
from dxts.core.adaptor.model import (
    CancelledKey,
    CancelResult,
    ComputePayload,
    DataPayload,
    Description,
    JobLogs,
    Outcome,
    Payload,
    PollResult,
    ReportMode,
    Submission,
    SubmitResult,
)
from dxts.core.catalogue import FileCatalogue
from dxts.core.errors import NotFound, Unavailable
from dxts.core.ids import id_to_str, new_ids
from dxts.core.states import Kind

log = logging.getLogger(__name__)

DATA_REFUSAL = "the Slurm adaptor runs compute parcels; data parcels go to a data adaptor"
VERSION = "slurm-1"
# The end states of a task that ran (so has a batch step), and how long a Poll waits for sacct to
# record that step after it reported the end.
RAN_STATES = frozenset({"COMPLETED", "FAILED", "OUT_OF_MEMORY", "TIMEOUT"})
ACCOUNTING_GRACE_S = 10.0


class SlurmAdaptor:
    def __init__(
        self,
        settings: SlurmSettings,
        catalogue: FileCatalogue | None = None,
        *,
        slurm: SlurmCluster,
        owns_catalogue: bool = False,
    ) -> None:
        """`slurm`: the cluster's commands (`dxts.backends.slurm.edge.commands.Slurm`).
        `owns_catalogue`: the adaptor opens and closes the catalogue with itself (as a process
        of its own; `dxts up` shares one it opens itself)."""
        self.settings = settings
        self.catalogue = catalogue
        self.owns_catalogue = owns_catalogue
        self.slurm = slurm
        self.store = State(settings.work_dir)
        self.submits: Counter[str] = Counter()  # Submits naming each key, since this start
        self.account: JobUser | None = None  # who jobs run as (set at start): never root
        self.started = 0  # array tasks handed to Slurm, since this start
        self._ended_without_step: dict[str, float] = {}  # identifier → when first seen so
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        self.account = account.job_account(self.settings)
        for folder in ("jobs", "batches"):
            (self.settings.work_dir / folder).mkdir(parents=True, exist_ok=True)
        assert self.settings.storage_root is not None
        for se in self.settings.storage_elements:
            (self.settings.storage_root / se).mkdir(parents=True, exist_ok=True)
        try:
            await self.slurm.run("scontrol", "ping")
        except SlurmError as error:
            last = str(error).strip().splitlines()[-1]
            raise Unavailable(f"no Slurm cluster answers (SLURM_CONF names it): {last}") from None
        await self.store.start()
        account.prepare_tree(self.settings, self.account)
        if self.owns_catalogue and self.catalogue is not None:
            await self.catalogue.start()

    async def stop(self) -> None:
        await self.store.close()
        if self.owns_catalogue and self.catalogue is not None:
            await self.catalogue.close()

    async def describe(self) -> Description:
        return Description(
            name=self.settings.name,
            kind=Kind.COMPUTE,
            report_mode=ReportMode.PULL,
            capacity=self.settings.capacity,
            version=VERSION,
            counters={
                **await self.store.counts(),
                "submits": sum(self.submits.values()),
                "repeated_submits": sum(n - 1 for n in self.submits.values() if n > 1),
                "started": self.started,
                "slurm_commands": self.slurm.calls,
            },
        )

    # -- Submit -------------------------------------------------------------------------------

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        refusals: dict[str, str] = {}
        requests: dict[str, Request] = {}
        for parcel in parcels:
            problem = key_problem(parcel.parcel_id) or self._payload_problem(payload)
            if problem is None:
                assert isinstance(payload, ComputePayload)
                try:
                    requests[parcel.parcel_id] = resource_request(payload, parcel, self.settings)
                except BadRequirements as error:
                    problem = str(error)
            if problem is not None:
                refusals[parcel.parcel_id] = problem
            else:
                self.submits[parcel.parcel_id] += 1
        wanted = [p for p in parcels if p.parcel_id in requests]
        if not wanted:
            identifiers: dict[str, str] = {}
        else:
            assert isinstance(payload, ComputePayload)
            async with self._lock:
                identifiers = await self._accept(payload, wanted, requests, refusals)
        return [
            SubmitResult.accepted(p.parcel_id, identifiers[p.parcel_id])
            if p.parcel_id in identifiers
            else SubmitResult.refused(p.parcel_id, refusals.get(p.parcel_id) or "refused")
            for p in parcels
        ]

    def _payload_problem(self, payload: Payload) -> str | None:
        if isinstance(payload, DataPayload):
            return DATA_REFUSAL
        if payload is None:
            return "no payload"
        root = payload.process_id
        if not any(p.process_id == root for p in payload.processes):
            return "the compute payload does not hold its root process"
        return None

    async def _accept(
        self,
        payload: ComputePayload,
        parcels: Sequence[Submission],
        requests: dict[str, Request],
        refusals: dict[str, str],
    ) -> dict[str, str]:
        """ParcelID → identifier of the accepted; refusals added to `refusals`."""
        if not parcels:
            return {}
        keys = [p.parcel_id for p in parcels]
        known = {job.parcel_id: job for job in await self.store.jobs_by(parcel_ids=keys)}
        tombstoned = await self.store.tombstoned([k for k in keys if k not in known])
        in_flight = await self.store.in_flight() if self.settings.capacity else 0
        groups: dict[Request, list[Submission]] = {}
        seen: set[str] = set()
        for parcel in parcels:
            key = parcel.parcel_id
            if key in known or key in seen:
                continue
            seen.add(key)
            if key in tombstoned:
                refusals[key] = "cancelled before it was accepted"
            elif self.settings.capacity and in_flight >= self.settings.capacity:
                refusals[key] = f"at capacity ({self.settings.capacity} in flight)"
            else:
                in_flight += 1
                groups.setdefault(requests[key], []).append(parcel)
        identifiers = {key: job.identifier for key, job in known.items()}
        new_batches = await self._prepare(payload, groups, identifiers)
        pending = {job.batch_id for job in known.values() if job.slurm_job_id is None}
        for stranded in await self.store.unsubmitted_batches(sorted(pending)):
            await self._submit_batch(stranded, adopt=True)
        for new in new_batches:
            await self._submit_batch(new, adopt=False)
        return identifiers

    async def _prepare(
        self,
        payload: ComputePayload,
        groups: dict[Request, list[Submission]],
        identifiers: dict[str, str],
    ) -> list[NewBatch]:
        """Prepare and record the new batches (before any sbatch); fills `identifiers`."""
        new_batches: list[NewBatch] = []
        new_jobs: list[NewJob] = []
        failed: list[Outcome] = []
        storage = self.settings.storage()
        for request, members in sorted(groups.items()):
            for start in range(0, len(members), self.settings.array_size):
                chunk = members[start : start + self.settings.array_size]
                fresh = [id_to_str(i) for i in new_ids(len(chunk) + 1)]
                batch_id, chunk_ids = fresh[0], fresh[1:]
                tasks: list[dict[str, Any] | None] = []
                for index, (parcel, identifier) in enumerate(zip(chunk, chunk_ids, strict=True)):
                    identifiers[parcel.parcel_id] = identifier
                    new_jobs.append(NewJob(parcel.parcel_id, identifier, batch_id, index))
                    try:
                        tasks.append(
                            await batch.prepare_parcel(
                                self.settings, storage, self.catalogue, payload, parcel, identifier
                            )
                        )
                        account.hand_over(batch.job_dir(self.settings, identifier), self.account)
                    except Exception as error:  # whatever broke, this parcel's outcome says it
                        why = error if isinstance(error, JobFailed) else None
                        why = why or JobFailed(parcel_failure(error))
                        failed.append(
                            outcomes.not_started(
                                self.settings.name,
                                parcel.parcel_id,
                                identifier,
                                str(why),
                                why.failure,
                            )
                        )
                        tasks.append(None)
                batch.prepare_batch(self.settings, storage, payload, batch_id, tasks)
                account.hand_over(batch.batch_dir(self.settings, batch_id), self.account)
                new_batches.append(
                    NewBatch(batch_id, f"dxts-{batch_id}", json.dumps(request.sbatch_options()))
                )
        await self.store.record_intent(new_batches, new_jobs, failed)
        return new_batches

    async def _submit_batch(self, new: NewBatch, *, adopt: bool) -> None:
        """sbatch one recorded batch (its tasks not ended yet), unless `adopt` finds Slurm
        already has it (submitted by a process that died before recording the job id)."""
        if adopt:
            found = await self.slurm.find_by_name(new.name)
            if found is not None:
                log.info("batch %s was submitted before a restart: job %s", new.batch_id, found)
                await self.store.set_slurm_job(new.batch_id, found)
                return
        members = [j for j in await self.store.batch_jobs(new.batch_id) if j.outcome is None]
        if not members:
            return
        try:
            job_id = await self.slurm.submit_array(
                batch.script(self.settings, new.batch_id),
                name=new.name,
                comment=f"dxts batch {new.batch_id}: {len(members)} parcels",
                tasks=[j.task_index for j in members],
                options=[*json.loads(new.options), *account.sbatch_options(self.account)],
                log=batch.slurm_log(self.settings, new.batch_id),
            )
        except SlurmError as error:
            found = await self.slurm.find_by_name(new.name)  # it may have been submitted
            if found is None:
                log.warning("sbatch of batch %s failed: %s", new.batch_id, error)
                # Slurm refused it for good (a retry would be refused again): failed, not run.
                await self.store.finish(
                    [outcomes.not_submitted(self.settings.name, j, str(error)) for j in members]
                )
                return
            job_id = found
        self.started += len(members)
        await self.store.set_slurm_job(new.batch_id, job_id)

    # -- Poll and Cancel ----------------------------------------------------------------------

    async def poll(self, identifiers: Sequence[str]) -> PollResult:
        found = {job.identifier: job for job in await self.store.jobs_by(identifiers=identifiers)}
        unknown = [i for i in identifiers if i not in found]
        ended = [job.outcome for job in found.values() if job.outcome is not None]
        running = [j for j in found.values() if j.outcome is None and j.slurm_job_id]
        try:
            records = await self.slurm.records([j.slurm_job_id or "" for j in running])
        except SlurmError as error:
            log.warning("sacct failed: %s", error)
            return PollResult(ended, unknown)
        now = datetime.now(UTC)
        fresh = []
        for job in running:
            array = job.slurm_job_id or ""
            record = records.get((array, job.task_index)) or records.get((array, WHOLE_ARRAY))
            if record is not None and record.terminal:
                if self._step_still_to_come(job.identifier, record):
                    continue
                try:
                    fresh.append(outcomes.from_record(self.settings, job, record))
                except Exception as error:  # what one task left must not stop every Poll
                    fresh.append(outcomes.unreadable(self.settings.name, job, record, error))
            elif (
                record is None
                and (now - job.created_at).total_seconds() > self.settings.lost_after_s
            ):
                fresh.append(outcomes.lost(self.settings.name, job))
        await self.store.finish(fresh)
        return PollResult([*ended, *fresh], unknown)

    def _step_still_to_come(self, identifier: str, record: TaskRecord) -> bool:
        """Whether to wait for the task's batch step before reporting it: sacct can say a task
        ended before it records the step that holds its usage and the script's own exit code,
        so a task whose state says it ran waits up to `ACCOUNTING_GRACE_S` for that line."""
        if record.started or record.state.split(" ")[0] not in RAN_STATES:
            self._ended_without_step.pop(identifier, None)
            return False
        first_seen = self._ended_without_step.setdefault(identifier, time.monotonic())
        if time.monotonic() - first_seen < ACCOUNTING_GRACE_S:
            return True
        del self._ended_without_step[identifier]
        return False

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs:
        """The task's runner stdout, its log and the tools' stderr, in its directory on the
        shared filesystem."""
        if not await self.store.jobs_by(identifiers=[identifier]):
            raise NotFound("job", identifier)
        directory = batch.job_dir(self.settings, identifier)
        return directory_logs(directory, RUNNER_STDOUT, RUNNER_LOG, max_bytes, TOOL_STDERR)

    async def cancel(self, identifiers: Sequence[str], parcel_ids: Sequence[str]) -> CancelResult:
        async with self._lock:
            by_identifier = {
                j.identifier: j for j in await self.store.jobs_by(identifiers=identifiers)
            }
            by_key = {j.parcel_id: j for j in await self.store.jobs_by(parcel_ids=parcel_ids)}
            await self.store.tombstone([p for p in parcel_ids if p not in by_key])
            targets = {
                j.identifier: j
                for j in [*by_identifier.values(), *by_key.values()]
                if j.outcome is None
            }
            unsubmitted = [j for j in targets.values() if j.slurm_job_id is None]
            await self.store.finish(
                [outcomes.cancelled_unsubmitted(self.settings.name, j) for j in unsubmitted]
            )
            try:
                await self.slurm.cancel([j.task for j in targets.values() if j.slurm_job_id])
            except SlurmError as error:
                log.warning("scancel failed: %s", error)
        return CancelResult(
            unknown_identifiers=[i for i in identifiers if i not in by_identifier],
            keys=[CancelledKey(p, by_key[p].identifier if p in by_key else "") for p in parcel_ids],
        )
