"""The Slurm adaptor over real gRPC on a real single-node Slurm cluster (`scripts/slurm`):
parcels run as array tasks to outcomes with outputs, Slurm's state and exit code, a job killed
for its memory, cancellation of queued and running jobs, one sbatch per batch, exactly-once
across a crash between sbatch and its record, usage from Slurm's accounting, lost jobs."""

from __future__ import annotations

import asyncio
import json
import pwd
import shutil
import subprocess
import zlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from adaptor_serving import serve_adaptor
from slurm_cluster import job_python, shared_directory, slurm_conf
from test_local_adaptor import (
    COPIER,
    FAILING,
    PYTHON,
    SLEEPER,
    WRITER,
    compute_payload,
    submission,
)
from test_local_adaptor import Harness as LocalHarness
from xrootd_servers import data_path, endpoints

from dxts.backends.slurm.edge.commands import Slurm, array_ranges
from dxts.backends.slurm.logic import batch, outcomes
from dxts.backends.slurm.logic.adaptor import SlurmAdaptor
from dxts.backends.slurm.logic.cluster import TaskRecord
from dxts.backends.slurm.settings import SlurmSettings
from dxts.backends.slurm.store.state import Job
from dxts.cli.adaptor_conformance import FAILING_TOOL, failing_script
from dxts.core.adaptor.mapping import payload_from_proto, submission_from_proto
from dxts.core.adaptor.model import FailureClass
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.errors import Unavailable
from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.ids import id_to_str, new_id
from dxts.core.storage import parse_endpoints
from dxts.v1 import backend_pb2, backend_pb2_grpc, common_pb2

ACCEPTED = backend_pb2.SUBMIT_DISPOSITION_ACCEPTED
HOG_BYTES = 600 * 2**20
HOG = {  # touches more memory than its parcel asks for, a little at a time
    "class": "CommandLineTool",
    "baseCommand": [
        PYTHON,
        "-c",
        "import time\nheld = []\nfor _ in range(120):\n"
        f"    held.append(b'x' * {HOG_BYTES // 60}); time.sleep(0.05)",
    ],
    "inputs": {},
    "outputs": {},
}
COUNTER = {  # appends one line per run to a file outside its sandbox
    "class": "CommandLineTool",
    "baseCommand": [PYTHON, "-c", "import sys; open(sys.argv[1], 'a').write('ran\\n')"],
    "inputs": {"runs": {"type": "string", "inputBinding": {"position": 1}}},
    "outputs": {},
}


JOB_USER = "dxts-job"  # scripts/job-sandbox makes it


class Harness(LocalHarness):
    """The local adaptor tests' harness, serving the Slurm adaptor instead: jobs run as the
    job account, from a folder it can reach (the nodes' shared filesystem)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.keys = DevKeys.load_or_create(tmp / "keys")
        self.token = self.keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
        self.slurm_settings = SlurmSettings(
            work_dir=tmp / "slurm",
            storage_elements=["LOCAL"],
            default_memory_mb=400,
            allowed_partitions=["dxts-held"],  # the DOWN partition of the tests' cluster
            job_user=JOB_USER,
            python=job_python(tmp, JOB_USER),
        )
        self.adaptor: Any = None
        self.server: GrpcServer | None = None
        self.catalogue: Any = None  # the file catalogue given to the adaptor, if any

    async def start(self, **overrides: Any) -> Any:
        settings = self.slurm_settings.model_copy(update=overrides)
        self.adaptor = SlurmAdaptor(settings, self.catalogue, slurm=Slurm(settings))
        await self.adaptor.start()
        self.server = await serve_adaptor(self.adaptor, self.keys.verifier())
        self.channel = channel(self.server.address, token=self.token, default_timeout=60)
        self.stub = backend_pb2_grpc.BackendAdaptorServiceStub(self.channel)
        return self.adaptor

    async def outcome(self, identifier: str, tries: int = 1800) -> common_pb2.Outcome:
        return await super().outcome(identifier, tries)  # a job takes tens of seconds here

    async def slurm_state(self, identifier: str) -> str:
        """The task's state as slurmctld has it (the accounting learns it a moment later)."""
        assert self.adaptor is not None
        (job,) = await self.adaptor.store.jobs_by(identifiers=[identifier])
        out = await self.adaptor.slurm.run("squeue", "-h", f"--jobs={job.task}", "-o%T")
        return out.strip()


def sacct(task: str, field: str) -> str:
    out = subprocess.run(
        ["sacct", "-n", "-P", "-X", f"--jobs={task}", f"--format={field}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.strip()


@pytest.fixture(scope="module")
def cluster() -> str:
    return slurm_conf()


@pytest.fixture(scope="module")
async def harness(cluster: str) -> AsyncIterator[Harness]:
    """One adaptor for the module (each parcel is its own; counters are compared as deltas): a
    test that restarts it leaves it started again with the module's settings."""
    shared = shared_directory()
    harness = Harness(shared)
    await harness.start()
    yield harness
    await harness.stop()
    shutil.rmtree(shared)


async def test_a_parcel_runs_as_a_slurm_job_to_its_outputs(harness: Harness) -> None:
    inputs = [id_to_str(new_id()), id_to_str(new_id())]
    parcel = submission({"message": "hello"}, input_ids=inputs)
    (result,) = await harness.submit(compute_payload(WRITER), parcel)
    assert result.disposition == ACCEPTED, result.reason
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    assert outcome.backend_status == "COMPLETED 0:0"
    assert (outcome.parcel_id, outcome.identifier) == (parcel.parcel_id, result.identifier)
    (output,) = outcome.outputs
    assert (output.lfn, output.size) == (f"{parcel.output_prefix}/result.txt", 5)
    settings = harness.slurm_settings.storage()
    assert settings.se_path("LOCAL", output.lfn).read_text() == "hello"
    assert '"action": "SUCCESS"' in outcome.status_report_json
    # The usage is Slurm's accounting's, and the parcel is in Slurm's records.
    wall = outcome.usage.wall_seconds
    assert wall >= 0 and wall == int(wall)  # sacct's elapsed time: whole seconds (0 if quick)
    assert outcome.usage.HasField("cpu_seconds")
    assert outcome.usage.max_memory_bytes > 10 * 2**20  # cwltool's own resident set at least
    assert harness.adaptor is not None
    (job,) = await harness.adaptor.store.jobs_by(identifiers=[result.identifier])
    assert parcel.parcel_id in sacct(job.task, "Comment")
    assert sacct(job.task, "TotalCPU")


async def test_a_job_runs_as_the_account_and_its_batch_files_are_its_alone(
    harness: Harness,
) -> None:
    whoami = {
        "class": "CommandLineTool",
        "baseCommand": ["id", "-u"],
        "inputs": {},
        "stdout": "uid.txt",
        "outputs": {"uid": {"type": "stdout"}},
    }
    (result,) = await harness.submit(compute_payload(whoami), submission())
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    (output,) = outcome.outputs
    stored = harness.slurm_settings.storage().se_path("LOCAL", output.lfn)
    account = pwd.getpwnam(JOB_USER)
    assert int(stored.read_text()) == account.pw_uid != 0
    assert harness.adaptor is not None
    (job,) = await harness.adaptor.store.jobs_by(identifiers=[result.identifier])
    assert sacct(job.task, "User") == JOB_USER
    folders = [
        batch.batch_dir(harness.slurm_settings, job.batch_id),
        batch.job_dir(harness.slurm_settings, result.identifier),
    ]
    for folder in folders:
        for path in [folder, *folder.rglob("*")]:
            status = path.lstat()
            assert status.st_mode & 0o077 == 0, f"{path} is open to others"
            assert status.st_uid == account.pw_uid, f"{path} is not the account's"
    state = harness.slurm_settings.work_dir / "state.sqlite"
    assert state.stat().st_mode & 0o077 == 0  # the adaptor's own, not the account's to read


async def test_a_failing_tool_is_failed_with_slurms_state_and_exit_code(harness: Harness) -> None:
    (result,) = await harness.submit(compute_payload(FAILING), submission())
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert outcome.backend_status == "FAILED 3:0"  # the tool's exit status, not cwltool's 1
    assert outcome.HasField("exit_code") and outcome.exit_code == 3
    assert "broken" in outcome.message
    assert outcome.usage.max_memory_bytes > 0
    # Its logs: the runner's log from the task's directory on the shared filesystem.
    logs = (
        await harness.stub.GetLogs(backend_pb2.GetLogsRequest(identifier=result.identifier))
    ).logs
    assert "broken" in logs.stderr
    assert logs.sandbox == str(batch.job_dir(harness.slurm_settings, result.identifier))


async def test_a_failing_tool_s_class_and_own_line_among_its_noise(harness: Harness) -> None:
    marked = "FATAL: geometry database unreachable (attempt 3)"
    parcel = submission({"script": failing_script(marked, 6)})
    (result,) = await harness.submit(compute_payload(FAILING_TOOL), parcel)
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert outcome.backend_status == "FAILED 6:0"
    assert outcome.failure.failure_class == common_pb2.FAILURE_CLASS_APPLICATION_ERROR
    assert (outcome.exit_code, outcome.failure.tool_message) == (6, marked)
    (job,) = await harness.adaptor.store.jobs_by(identifiers=[result.identifier])
    node = await asyncio.to_thread(sacct, job.task, "NodeList")
    assert node and outcome.failure.site == node  # where Slurm ran it
    logs = (
        await harness.stub.GetLogs(backend_pb2.GetLogsRequest(identifier=result.identifier))
    ).logs
    assert logs.stderr.endswith(
        f"{marked}\n" + "\n".join(f"step {n} of the work: going fine" for n in range(25)) + "\n"
    )


async def test_a_job_over_its_memory_is_killed_and_says_so(harness: Harness) -> None:
    parcel = submission(requirements_json='{"memory_mb": 300}')
    (result,) = await harness.submit(compute_payload(HOG), parcel)
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert "OUT_OF_MEMORY" in outcome.backend_status
    assert "memory" in outcome.message.lower()
    assert outcome.failure.failure_class == common_pb2.FAILURE_CLASS_OUT_OF_MEMORY


async def test_a_batch_is_one_sbatch_and_a_second_submit_starts_nothing(
    harness: Harness,
) -> None:
    assert harness.adaptor is not None
    slurm = harness.adaptor.slurm
    parcels = [submission({"message": f"m{i}"}, input_ids=[id_to_str(new_id())]) for i in range(4)]
    before = slurm.calls
    counted = (await harness.stub.Describe(backend_pb2.DescribeRequest())).counters
    results = await harness.submit(compute_payload(WRITER), *parcels)
    assert [r.disposition for r in results] == [ACCEPTED] * 4
    assert slurm.calls - before == 1  # one sbatch --array for the four
    again = await harness.submit(compute_payload(WRITER), *parcels)
    assert [r.identifier for r in again] == [r.identifier for r in results]
    assert slurm.calls - before == 1
    for result in results:
        outcome = await harness.outcome(result.identifier)
        assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    counters = (await harness.stub.Describe(backend_pb2.DescribeRequest())).counters
    started = counters["started"] - counted["started"]
    repeated = counters["repeated_submits"] - counted["repeated_submits"]
    assert (started, repeated) == (4, 4)


async def test_a_large_batch_is_one_array_and_one_scancel(harness: Harness) -> None:
    assert harness.adaptor is not None
    slurm = harness.adaptor.slurm
    held = [submission(requirements_json='{"partition": "dxts-held"}') for _ in range(150)]
    before = slurm.calls
    results = await harness.submit(compute_payload(WRITER), *held)
    assert [r.disposition for r in results] == [ACCEPTED] * 150
    assert slurm.calls - before == 1
    identifiers = [r.identifier for r in results]
    jobs = await harness.adaptor.store.jobs_by(identifiers=identifiers)
    assert len({j.slurm_job_id for j in jobs}) == 1 and all(j.slurm_job_id for j in jobs)
    assert await harness.slurm_state(identifiers[-1]) == "PENDING"
    before = slurm.calls
    await harness.stub.Cancel(backend_pb2.CancelRequest(identifiers=identifiers))
    assert slurm.calls - before == 1  # one scancel for the 150
    for identifier in identifiers[:: len(identifiers) - 1]:  # the first and the last
        outcome = await harness.outcome(identifier)
        assert outcome.result == common_pb2.OUTCOME_RESULT_CANCELLED


@pytest.mark.parametrize(
    ("state", "signal", "written", "expected"),
    [
        ("TIMEOUT", 15, None, FailureClass.TIME_EXCEEDED),
        ("NODE_FAIL", 0, None, FailureClass.LOST),
        ("PREEMPTED", 0, None, FailureClass.KILLED),
        ("FAILED", 9, None, FailureClass.KILLED),
        ("FAILED", 0, None, FailureClass.SETUP_ERROR),
        ("FAILED", 0, "application-error", FailureClass.APPLICATION_ERROR),
        ("OUT_OF_MEMORY", 9, "killed", FailureClass.OUT_OF_MEMORY),
    ],
)
def test_slurm_s_state_classifies_a_failure_before_what_the_job_wrote(
    tmp_path: Path, state: str, signal: int, written: str | None, expected: FailureClass
) -> None:
    settings = SlurmSettings(work_dir=tmp_path)
    job = Job(id_to_str(new_id()), "task", "batch", 0, "17", datetime.now(UTC), None)
    directory = batch.job_dir(settings, job.identifier)
    directory.mkdir(parents=True)
    if written is not None:
        result = {"error": "it failed", "failure": {"class": written, "tool_message": "ERROR: x"}}
        (directory / "result.json").write_text(json.dumps(result))
    record = TaskRecord(state, exit_code=0, signal=signal, started=True, nodes="wn042")
    failure = outcomes.from_record(settings, job, record).failure
    assert failure is not None and failure.failure_class is expected
    assert failure.tool_message == ("ERROR: x" if written else "")
    assert failure.site == "wn042"  # where Slurm ran it, whoever classified it


def test_array_ranges_are_compact() -> None:
    assert array_ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert array_ranges([3]) == "3"
    assert array_ranges(range(1000)) == "0-999"


async def test_cancel_of_a_queued_job(harness: Harness) -> None:
    held = submission(requirements_json='{"partition": "dxts-held"}')  # a DOWN partition
    (result,) = await harness.submit(compute_payload(WRITER), held)
    assert await harness.slurm_state(result.identifier) == "PENDING"
    reply = await harness.stub.Cancel(backend_pb2.CancelRequest(identifiers=[result.identifier]))
    assert not reply.unknown_identifiers
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_CANCELLED
    assert outcome.backend_status.startswith("CANCELLED")
    assert not outcome.HasField("usage")  # it never ran


async def test_cancel_of_a_running_job_kills_it(harness: Harness) -> None:
    (result,) = await harness.submit(compute_payload(SLEEPER), submission())
    pid_file = harness.slurm_settings.work_dir / "jobs" / result.identifier / "out"
    for _ in range(600):
        pids = list(pid_file.parent.glob("tmp/**/pid")) + list(pid_file.glob("**/pid"))
        if pids and pids[0].read_text():
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the sleeper did not start")
    pid = int(pids[0].read_text())
    await harness.stub.Cancel(backend_pb2.CancelRequest(identifiers=[result.identifier]))
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_CANCELLED
    for _ in range(300):  # slurmstepd signals the job's processes, SIGKILL after KillWait
        if not await asyncio.to_thread(Path(f"/proc/{pid}").exists):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the tool (pid {pid}) outlived its cancelled job")


async def test_killed_after_sbatch_before_recording_the_job_runs_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = harness.tmp / f"runs-{id_to_str(new_id())}.txt"
    runs.touch()
    shutil.chown(runs, JOB_USER)  # the job (the account) appends to it
    parcel = submission({"runs": str(runs)})
    assert harness.adaptor is not None

    async def dies(batch_id: str, job_id: str) -> None:
        raise SystemExit("killed between sbatch and its record")

    monkeypatch.setattr(harness.adaptor.store, "set_slurm_job", dies)
    with pytest.raises(SystemExit):
        await harness.adaptor.submit(
            payload_from_proto(compute_payload(COUNTER)), [submission_from_proto(parcel)]
        )
    await harness.stop()
    await harness.start()  # a new process over the same state
    (first,) = await harness.submit(compute_payload(COUNTER), parcel)
    (second,) = await harness.submit(compute_payload(COUNTER), parcel)
    assert first.disposition == ACCEPTED and first.identifier == second.identifier
    outcome = await harness.outcome(first.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    assert runs.read_text() == "ran\n"
    counters = (await harness.stub.Describe(backend_pb2.DescribeRequest())).counters
    assert counters["started"] == 0  # the new process submitted nothing: it found the job


async def test_refusals_and_keys_cancelled_before_acceptance(harness: Harness) -> None:
    data = backend_pb2.Payload(data=backend_pb2.DataPayload())
    (refused,) = await harness.submit(data, submission(request_json='{"op": "remove"}'))
    assert refused.disposition == backend_pb2.SUBMIT_DISPOSITION_REFUSED
    assert "data parcels" in refused.reason
    no_cores = submission(requirements_json='{"cores": 0}')
    (bad,) = await harness.submit(compute_payload(WRITER), no_cores)
    assert "requirements.cores" in bad.reason
    never = submission({"message": "x"})
    reply = await harness.stub.Cancel(backend_pb2.CancelRequest(parcel_ids=[never.parcel_id]))
    assert [(k.parcel_id, k.identifier) for k in reply.keys] == [(never.parcel_id, "")]
    (late,) = await harness.submit(compute_payload(WRITER), never)
    assert late.disposition == backend_pb2.SUBMIT_DISPOSITION_REFUSED


async def test_a_job_slurm_does_not_know_is_lost(harness: Harness) -> None:
    await harness.stop()
    adaptor = await harness.start(lost_after_s=0.01)
    try:
        held = submission(requirements_json='{"partition": "dxts-held"}')
        (result,) = await harness.submit(compute_payload(WRITER), held)
        (job,) = await adaptor.store.jobs_by(identifiers=[result.identifier])
        await adaptor.slurm.cancel([job.task])
        await adaptor.store.set_slurm_job(job.batch_id, "999999999")  # Slurm never had it
        outcome = await harness.outcome(result.identifier)
    finally:
        await harness.stop()
        await harness.start()
    assert (outcome.result, outcome.backend_status) == (common_pb2.OUTCOME_RESULT_FAILED, "LOST")
    assert outcome.failure.failure_class == common_pb2.FAILURE_CLASS_LOST
    unknown = await harness.stub.Poll(backend_pb2.PollRequest(identifiers=[id_to_str(new_id())]))
    assert len(unknown.unknown_identifiers) == 1


async def test_without_a_cluster_the_adaptor_does_not_start(tmp_path: Path) -> None:
    settings = SlurmSettings(work_dir=tmp_path / "slurm", commands_dir=str(tmp_path / "none"))
    with pytest.raises(Unavailable, match=r"no Slurm cluster answers .*cannot run scontrol"):
        await SlurmAdaptor(settings, slurm=Slurm(settings)).start()


async def test_an_error_preparing_one_parcel_is_its_failed_outcome_and_the_others_run(
    harness: Harness,
) -> None:
    """Whatever raises while one parcel of a Submit is prepared (here its parameters, which
    are not JSON) is that parcel's FAILED outcome in the error's own words; the Submit is not
    refused whole and the other parcel of it runs."""
    broken = submission()
    broken.parameters_json = "{"
    good = submission({"message": "fine"})
    results = await harness.submit(compute_payload(WRITER), broken, good)
    assert [r.disposition for r in results] == [ACCEPTED, ACCEPTED]
    failed = await harness.outcome(results[0].identifier, tries=1)
    assert failed.result == common_pb2.OUTCOME_RESULT_FAILED
    assert failed.backend_status == "NOT_SUBMITTED"
    assert failed.message.startswith("JSONDecodeError: Expecting property name")
    assert failed.failure.failure_class == common_pb2.FAILURE_CLASS_SETUP_ERROR
    ran = await harness.outcome(results[1].identifier)
    assert ran.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, ran.message


async def test_an_error_reading_one_task_s_end_is_its_failed_outcome_and_the_poll_goes_on(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever raises while one ended task's outcome is read (here the reader itself, as
    what a task left could make it) is that parcel's FAILED outcome with Slurm's state; the
    Poll answers for the other parcels too."""
    unreadable, readable = submission({"message": "a"}), submission({"message": "b"})
    read = outcomes.from_record

    def breaking(settings: Any, job: Job, record: TaskRecord) -> Any:
        if job.parcel_id == unreadable.parcel_id:
            raise OSError(5, "Input/output error")
        return read(settings, job, record)

    monkeypatch.setattr(outcomes, "from_record", breaking)
    results = await harness.submit(compute_payload(WRITER), unreadable, readable)
    assert [r.disposition for r in results] == [ACCEPTED, ACCEPTED]
    identifiers = [r.identifier for r in results]
    ended: dict[str, common_pb2.Outcome] = {}
    for _ in range(1800):  # a bound, not a timing: a job takes tens of seconds here
        reply = await harness.stub.Poll(backend_pb2.PollRequest(identifiers=identifiers))
        ended.update((o.identifier, o) for o in reply.outcomes)
        if len(ended) == 2:
            break
        await asyncio.sleep(0.1)
    failed, succeeded = ended[identifiers[0]], ended[identifiers[1]]
    assert failed.result == common_pb2.OUTCOME_RESULT_FAILED
    assert failed.backend_status == "COMPLETED 0:0"
    assert failed.message.endswith("cannot be read: OSError: [Errno 5] Input/output error")
    assert failed.failure.tool_message == "OSError: [Errno 5] Input/output error"
    assert succeeded.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, succeeded.message


async def test_jobs_stage_over_xrootd_in_from_the_adaptor_and_out_from_their_node(
    harness: Harness, tmp_path: Path
) -> None:
    """With an XRootD output SE (a real server), the task uploads its outputs there itself,
    checked, and the outcome names that SE; the next job's `lfn:` input, only that server holds,
    is fetched into its directory by the adaptor before sbatch, and read by the job account."""
    folder = f"slurm-test/{id_to_str(new_id())}"
    chosen = parse_endpoints({"XRD-B": f"{endpoints()['XRD-B']}/{folder}"})
    catalogue = LocalFileCatalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{tmp_path / 'catalogue.sqlite'}")
    )
    await catalogue.start()
    await harness.stop()
    harness.catalogue = catalogue
    await harness.start(storage_endpoints=chosen, output_se="XRD-B")
    try:
        (result,) = await harness.submit(compute_payload(WRITER), submission({"message": "hi"}))
        written = await harness.outcome(result.identifier)
        assert written.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, written.message
        (output,) = written.outputs
        await catalogue.register(
            [CatalogueFile(lfn=output.lfn, size=2, checksum=output.checksum, replicas=("XRD-B",))]
        )
        reading = submission({"input-data": {"class": "File", "location": f"lfn:{output.lfn}"}})
        (result,) = await harness.submit(compute_payload(COPIER), reading)
        copied = await harness.outcome(result.identifier)
    finally:
        await harness.stop()
        harness.catalogue = None
        await harness.start()
        await catalogue.close()
    assert (output.storage_element, output.checksum) == (
        "XRD-B",
        f"adler32:{zlib.adler32(b'hi'):08x}",
    )
    assert data_path("XRD-B", f"/dxts/{folder}{output.lfn}").read_text() == "hi"
    assert copied.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, copied.message
    (copy,) = copied.outputs
    assert copy.storage_element == "XRD-B"
    assert data_path("XRD-B", f"/dxts/{folder}{copy.lfn}").read_text() == "hi"
