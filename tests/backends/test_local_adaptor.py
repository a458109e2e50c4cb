"""The local adaptor over real gRPC, running real CWL with cwltool: manifests and status reports,
failures, staging `lfn:` inputs through the catalogue, cancellation that kills the process,
idempotency across a restart, capacity, and data requests between storage elements."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dxts.backends.edge.servicer import adaptor_service
from dxts.backends.local.logic.adaptor import LocalAdaptor
from dxts.backends.local.settings import LocalSettings
from dxts.backends.runner.cwl import payload_exit_code
from dxts.cli.adaptor_conformance import FAILING_TOOL, failing_script
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.errors import NotFound
from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.ids import content_hash, hash_to_str, id_to_str, new_id
from dxts.core.settings import ServerSettings
from dxts.v1 import backend_pb2, backend_pb2_grpc, common_pb2

# The tools' interpreter: one the job user can run (this machine's own Python lives in root's
# home, closed to every other user; the system's needs nothing but the standard library).
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
WRITE = """
import json, sys
message, ids = sys.argv[1], sys.argv[2:]
open("result.txt", "w").write(message)
report = {i: {"action": "SUCCESS"} for i in ids}
if message == "split":
    good = [{"lfn": "/a/part1", "lfn_size": 1, "descriptor": {}}]
    bad = [{"lfn": "/a/part2", "lfn_size": 1, "data": {}}]
    report = {i: {"action": "SPLIT", "SUCCESS": good, "FAILURE": bad} for i in ids}
open("report.json", "w").write(json.dumps(report))
"""
WRITER = {
    "class": "CommandLineTool",
    "baseCommand": [PYTHON, "-c", WRITE],
    "inputs": {
        "message": {"type": "string", "inputBinding": {"position": 1}},
        "dxts-input-ids": {"type": "string[]", "inputBinding": {"position": 2}},
    },
    "outputs": {
        "output-data": {"type": "File", "outputBinding": {"glob": "result.txt"}},
        "status-report": {"type": "File", "outputBinding": {"glob": "report.json"}},
    },
}
FAILING = {
    "class": "CommandLineTool",
    "baseCommand": [PYTHON, "-c", "import sys; print('broken', file=sys.stderr); sys.exit(3)"],
    "inputs": {},
    "outputs": {},
}
SLEEPER = {
    "class": "CommandLineTool",
    "baseCommand": [
        PYTHON,
        "-c",
        "import os, time; open('pid', 'w').write(str(os.getpid())); time.sleep(120)",
    ],
    "inputs": {},
    "outputs": {},
}
BURN_S = 0.5  # CPU seconds the burner spends
BURN_BYTES = 300 * 10**6  # the memory it touches: more than the runner's own
BURNER = {
    "class": "CommandLineTool",
    "baseCommand": [
        PYTHON,
        "-c",
        f"import time; held = b'x' * {BURN_BYTES}\nwhile time.process_time() < {BURN_S}: pass",
    ],
    "inputs": {},
    "outputs": {},
}
COPIER = {
    "class": "CommandLineTool",
    "baseCommand": [PYTHON, "-c", "import shutil, sys; shutil.copy(sys.argv[1], 'copy.dst')"],
    "inputs": {"input-data": {"type": "File", "inputBinding": {"position": 1}}},
    "outputs": {"copy": {"type": "File", "outputBinding": {"glob": "copy.dst"}}},
}


def compute_payload(process: dict[str, Any]) -> backend_pb2.Payload:
    process_id = hash_to_str(content_hash(process))
    return backend_pb2.Payload(
        compute=backend_pb2.ComputePayload(
            process_id=process_id,
            processes=[
                backend_pb2.ProcessDocument(
                    process_id=process_id, document_json=json.dumps(process)
                )
            ],
            resolved_hints_id="0" * 64,
            resolved_hints_json='{"output_sandbox": []}',
        )
    )


def submission(parameters: Any = None, **fields: Any) -> backend_pb2.ParcelSubmission:
    parcel_id = id_to_str(new_id())
    return backend_pb2.ParcelSubmission(
        parcel_id=parcel_id,
        parameters_json=json.dumps(parameters or {}),
        output_prefix=f"/dxts/test/{parcel_id}",
        **fields,
    )


class Harness:
    def __init__(self, tmp: Path, catalogue: LocalFileCatalogue) -> None:
        self.tmp = tmp
        self.catalogue = catalogue
        self.keys = DevKeys.load_or_create(tmp / "keys")
        self.token = self.keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
        self.settings = LocalSettings(
            work_dir=tmp / "local",
            storage_elements=["LOCAL", "TAPE"],
            storage_endpoints={},  # its two folder SEs only, whatever the shell exports
            workers=2,
            kill_grace_s=1,
        )
        self.adaptor: LocalAdaptor | None = None
        self.server: GrpcServer | None = None
        self.channel: Any = None
        self.stub: Any = None

    async def start(self, **overrides: Any) -> LocalAdaptor:
        settings = self.settings.model_copy(update=overrides)
        self.adaptor = LocalAdaptor(settings, self.catalogue)
        await self.adaptor.start()
        self.server = GrpcServer(
            [adaptor_service(self.adaptor)],
            settings=ServerSettings(listen="127.0.0.1:0"),
            verifier=self.keys.verifier(),
        )
        await self.server.start()
        self.channel = channel(self.server.address, token=self.token, default_timeout=30)
        self.stub = backend_pb2_grpc.BackendAdaptorServiceStub(self.channel)
        return self.adaptor

    async def stop(self) -> None:
        if self.server is not None:
            await self.channel.close()
            await self.server.stop(grace=0)
            assert self.adaptor is not None
            await self.adaptor.stop()
            self.server = None

    async def submit(
        self, payload: backend_pb2.Payload, *parcels: backend_pb2.ParcelSubmission
    ) -> list[backend_pb2.SubmitResult]:
        reply = await self.stub.Submit(backend_pb2.SubmitRequest(payload=payload, parcels=parcels))
        return list(reply.results)

    async def outcome(self, identifier: str, tries: int = 600) -> common_pb2.Outcome:
        """Poll until the parcel is terminal (cwltool takes about a second per run)."""
        for _ in range(tries):
            reply = await self.stub.Poll(backend_pb2.PollRequest(identifiers=[identifier]))
            if reply.outcomes:
                return reply.outcomes[0]
            await asyncio.sleep(0.1)
        raise AssertionError(f"{identifier} did not finish")


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    catalogue = LocalFileCatalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{tmp_path / 'catalogue.sqlite'}")
    )
    await catalogue.start()
    harness = Harness(tmp_path, catalogue)
    await harness.start()
    yield harness
    await harness.stop()
    await catalogue.close()


async def test_a_tool_writes_an_output_and_a_status_report(harness: Harness) -> None:
    inputs = [id_to_str(new_id()), id_to_str(new_id())]
    parcel = submission({"message": "hello"}, input_ids=inputs)
    (result,) = await harness.submit(compute_payload(WRITER), parcel)
    assert result.disposition == backend_pb2.SUBMIT_DISPOSITION_ACCEPTED
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    assert (outcome.parcel_id, outcome.identifier) == (parcel.parcel_id, result.identifier)
    assert json.loads(outcome.status_report_json) == {i: {"action": "SUCCESS"} for i in inputs}
    (output,) = outcome.outputs
    assert output.output_name == "output-data"
    assert output.lfn == f"{parcel.output_prefix}/result.txt"
    assert (output.size, output.storage_element) == (5, "LOCAL")
    assert output.checksum.startswith("adler32:")
    assert harness.settings.se_path("LOCAL", output.lfn).read_text() == "hello"
    sandbox = harness.settings.work_dir / "jobs" / result.identifier
    assert (sandbox / "runner.log").read_text()
    assert json.loads((sandbox / "job.json").read_text())["dxts-input-ids"] == inputs


async def test_a_tool_that_exits_non_zero_is_a_failure(harness: Harness) -> None:
    told = asyncio.Event()
    assert harness.adaptor is not None
    harness.adaptor.finished = told.set  # what wakes the dispatcher's poll in dxts up
    (result,) = await harness.submit(compute_payload(FAILING), submission())
    await asyncio.wait_for(told.wait(), timeout=600)
    outcome = await harness.outcome(result.identifier, tries=1)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert "exited with" in outcome.message
    assert "broken" in outcome.message
    assert outcome.HasField("exit_code") and outcome.exit_code == 3  # the tool's, not cwltool's
    assert not outcome.outputs
    assert outcome.usage.cpu_seconds > 0  # measured on a failure too
    assert outcome.usage.max_memory_bytes > 0
    # Its logs: the runner's stderr (the tool's included), and the job directory as sandbox.
    got = (
        await harness.stub.GetLogs(backend_pb2.GetLogsRequest(identifier=result.identifier))
    ).logs
    assert "broken" in got.stderr and not got.truncated
    assert got.sandbox == str(harness.settings.work_dir / "jobs" / result.identifier)
    tail = (
        await harness.stub.GetLogs(
            backend_pb2.GetLogsRequest(identifier=result.identifier, max_bytes=6)
        )
    ).logs
    assert tail.truncated and got.stderr.endswith(tail.stderr) and len(tail.stderr) <= 6
    with pytest.raises(NotFound):
        await harness.stub.GetLogs(backend_pb2.GetLogsRequest(identifier="never-given"))


def failing_script_stderr(marked: str) -> str:
    noise = [f"step {n} of the work: going fine" for n in range(25)]
    return "\n".join([*noise, marked, *noise, ""])


async def test_a_failing_tool_is_classified_with_its_own_line(harness: Harness) -> None:
    marked = "ERROR: calibration constant 17 missing for run 4411"
    parcel = submission({"script": failing_script(marked, 5)})
    (result,) = await harness.submit(compute_payload(FAILING_TOOL), parcel)
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert outcome.failure.failure_class == common_pb2.FAILURE_CLASS_APPLICATION_ERROR
    assert outcome.exit_code == 5
    assert outcome.failure.tool_message == marked  # not the runner's banner, nor its log
    assert outcome.failure.site == harness.settings.site == socket.gethostname()
    assert outcome.message == f"the tool exited with 5: {marked}"
    # The full streams stay available: the runner's log, then the tool's stderr.
    logs = (
        await harness.stub.GetLogs(backend_pb2.GetLogsRequest(identifier=result.identifier))
    ).logs
    assert logs.stderr.startswith("==> runner.log <==\nINFO ")
    assert logs.stderr.endswith("==> tool.stderr <==\n" + failing_script_stderr(marked))


def test_the_site_a_failure_names_is_the_installation_s_else_the_host_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert LocalSettings().site == socket.gethostname()
    monkeypatch.setenv("DXTS_LOCAL_SITE", "CERN-T0-batch")
    assert LocalSettings().site == "CERN-T0-batch"


async def test_a_tool_killed_by_a_signal_and_a_broken_document_have_their_classes(
    harness: Harness,
) -> None:
    killed = submission({"script": "echo 'about to die' >&2; kill -9 $$"})
    broken = {**FAILING_TOOL, "inputs": {"script": {"type": "NoSuchType"}}}
    (first,) = await harness.submit(compute_payload(FAILING_TOOL), killed)
    (second,) = await harness.submit(compute_payload(broken), submission({"script": "x"}))
    outcome = await harness.outcome(first.identifier)
    assert outcome.failure.failure_class == common_pb2.FAILURE_CLASS_KILLED
    assert outcome.failure.tool_message == "about to die"
    assert outcome.message == "the tool was killed by SIGKILL: about to die"
    outcome = await harness.outcome(second.identifier)
    assert outcome.failure.failure_class == common_pb2.FAILURE_CLASS_SETUP_ERROR
    assert not outcome.HasField("exit_code")
    assert "NoSuchType" in outcome.message


def test_the_payload_exit_code_is_the_last_failed_tool_s_in_the_runner_log() -> None:
    log = (
        "INFO [job step1] completed success\n"
        "WARNING [job step2_2] exited with status: 137\n"
        "WARNING [job merge] exited with status: 2\n"
        "WARNING [job merge] completed permanentFail\n"
    )
    assert payload_exit_code(log) == 2
    assert payload_exit_code("WARNING [job tool] was terminated by signal: SIGKILL\n") is None
    assert payload_exit_code("ERROR Tool definition failed validation\n") is None


async def test_a_run_reports_its_cpu_wall_time_and_peak_memory(harness: Harness) -> None:
    (result,) = await harness.submit(compute_payload(BURNER), submission())
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    usage = outcome.usage
    assert usage.HasField("cpu_seconds") and usage.HasField("max_memory_bytes")
    # The tool's own CPU is in it (the runner waited for it), and the runner's besides.
    assert usage.cpu_seconds >= BURN_S
    assert usage.wall_seconds >= BURN_S
    # The largest process is the tool, holding its bytes (ru_maxrss read as KiB, not bytes).
    assert BURN_BYTES <= usage.max_memory_bytes < 4 * BURN_BYTES
    sandbox = harness.settings.work_dir / "jobs" / result.identifier
    assert json.loads((sandbox / "usage.json").read_text())["cpu_seconds"] == usage.cpu_seconds


async def test_a_tool_reporting_split_yields_that_report(harness: Harness) -> None:
    inputs = [id_to_str(new_id())]
    (result,) = await harness.submit(
        compute_payload(WRITER), submission({"message": "split"}, input_ids=inputs)
    )
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    report = json.loads(outcome.status_report_json)
    assert report[inputs[0]]["action"] == "SPLIT"
    assert [c["lfn"] for c in report[inputs[0]]["SUCCESS"]] == ["/a/part1"]
    assert [c["lfn"] for c in report[inputs[0]]["FAILURE"]] == ["/a/part2"]


async def test_lfn_inputs_are_staged_from_a_local_replica(harness: Harness) -> None:
    lfn = "/lhcb/data/run1/file.dst"
    replica = harness.settings.se_path("TAPE", lfn)
    replica.parent.mkdir(parents=True)
    replica.write_bytes(b"event data")
    await harness.catalogue.register([CatalogueFile(lfn=lfn, size=10, replicas=("TAPE",))])
    parcel = submission({"input-data": {"class": "File", "location": f"lfn:{lfn}"}})
    (result,) = await harness.submit(compute_payload(COPIER), parcel)
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    (output,) = outcome.outputs
    assert harness.settings.se_path("LOCAL", output.lfn).read_bytes() == b"event data"

    missing = submission({"input-data": {"class": "File", "location": "lfn:/lhcb/nowhere.dst"}})
    (result,) = await harness.submit(compute_payload(COPIER), missing)
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert "cannot stage lfn:/lhcb/nowhere.dst" in outcome.message
    assert not outcome.HasField("exit_code")  # nothing ran
    failure = outcome.failure
    assert failure.failure_class == common_pb2.FAILURE_CLASS_STAGE_IN
    assert (failure.lfn, failure.storage_element) == ("/lhcb/nowhere.dst", "LOCAL, TAPE")


def processes_named(marker: str) -> list[int]:
    """The processes on this machine whose command line holds `marker` (a job runs in a pid
    namespace of its own: the pid it sees of itself is not the machine's)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


async def test_cancel_kills_the_running_process(harness: Harness) -> None:
    marker = f"sleeper-{new_id()}"
    sleeper = {**SLEEPER, "baseCommand": [*SLEEPER["baseCommand"], marker]}
    (result,) = await harness.submit(compute_payload(sleeper), submission())
    pid_file = harness.settings.work_dir / "jobs" / result.identifier / "out"
    pids: list[int] = []
    for _ in range(300):
        found = list(pid_file.rglob("pid")) + list((pid_file.parent / "tmp").rglob("pid"))
        if found and found[0].read_text():
            pids = processes_named(marker)
            break
        await asyncio.sleep(0.1)
    assert pids, "the tool never started"
    reply = await harness.stub.Cancel(backend_pb2.CancelRequest(identifiers=[result.identifier]))
    assert not reply.unknown_identifiers
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_CANCELLED
    for _ in range(50):
        if not processes_named(marker):
            break
        await asyncio.sleep(0.1)
    assert not processes_named(marker)


async def test_submit_is_idempotent_across_a_restart(harness: Harness) -> None:
    parcel = submission({"message": "once"}, input_ids=[id_to_str(new_id())])
    (first,) = await harness.submit(compute_payload(WRITER), parcel)
    (again,) = await harness.submit(compute_payload(WRITER), parcel)
    assert again.identifier == first.identifier
    outcome = await harness.outcome(first.identifier)
    assert harness.adaptor is not None and harness.adaptor.started[parcel.parcel_id] == 1

    sleeping = submission()
    (running,) = await harness.submit(compute_payload(SLEEPER), sleeping)
    for _ in range(300):
        counts = (await harness.stub.Describe(backend_pb2.DescribeRequest())).counters
        if counts.get("jobs_running"):
            break
        await asyncio.sleep(0.1)
    await harness.stop()

    restarted = await harness.start()
    (after,) = await harness.submit(compute_payload(WRITER), parcel)
    assert after.identifier == first.identifier
    assert await harness.outcome(first.identifier) == outcome
    assert not restarted.started  # nothing ran again
    interrupted = await harness.outcome(running.identifier)
    assert interrupted.result == common_pb2.OUTCOME_RESULT_FAILED
    assert "interrupted by a restart" in interrupted.message
    counters = (await harness.stub.Describe(backend_pb2.DescribeRequest())).counters
    assert (counters["accepted"], counters["in_flight"]) == (2, 0)


async def test_capacity_and_cancelled_keys_are_refused(harness: Harness) -> None:
    await harness.stop()
    await harness.start(capacity=1)
    first, second = submission(), submission()
    answers = await harness.submit(compute_payload(SLEEPER), first, second)
    assert [a.disposition for a in answers] == [
        backend_pb2.SUBMIT_DISPOSITION_ACCEPTED,
        backend_pb2.SUBMIT_DISPOSITION_REFUSED,
    ]
    assert "capacity" in answers[1].reason
    reply = await harness.stub.Cancel(
        backend_pb2.CancelRequest(parcel_ids=[first.parcel_id, second.parcel_id])
    )
    assert [(k.parcel_id, k.identifier) for k in reply.keys] == [
        (first.parcel_id, answers[0].identifier),
        (second.parcel_id, ""),
    ]
    assert (await harness.outcome(answers[0].identifier)).result == (
        common_pb2.OUTCOME_RESULT_CANCELLED
    )
    (late,) = await harness.submit(compute_payload(SLEEPER), second)
    assert late.disposition == backend_pb2.SUBMIT_DISPOSITION_REFUSED
    assert "cancelled" in late.reason


async def test_data_requests_move_replicas_between_storage_elements(harness: Harness) -> None:
    lfns = ["/lhcb/raw/a.raw", "/lhcb/raw/b.raw"]
    for lfn in lfns:
        path = harness.settings.se_path("LOCAL", lfn)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"raw!")
    await harness.catalogue.register(
        [CatalogueFile(lfn=lfn, size=4, replicas=("LOCAL",)) for lfn in lfns]
    )
    files = [{"LFN": lfn} for lfn in lfns]
    request = {
        "Operations": [
            {"Type": "ReplicateAndRegister", "TargetSE": "TAPE", "Files": files},
            {"Type": "RemoveReplica", "TargetSE": "LOCAL", "Files": files},
        ]
    }
    data = backend_pb2.Payload(data=backend_pb2.DataPayload())
    (result,) = await harness.submit(
        data,
        backend_pb2.ParcelSubmission(
            parcel_id=id_to_str(new_id()), request_json=json.dumps(request), vo="lhcb"
        ),
    )
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    for lfn in lfns:
        assert harness.settings.se_path("TAPE", lfn).read_bytes() == b"raw!"
        assert not harness.settings.se_path("LOCAL", lfn).exists()
    assert await harness.catalogue.replicas(lfns) == {lfn: ("TAPE",) for lfn in lfns}
    logs = (
        await harness.stub.GetLogs(backend_pb2.GetLogsRequest(identifier=result.identifier))
    ).logs
    assert logs.stdout == "".join(f"done: {lfn}\n" for lfn in lfns)  # each file's fate

    bad = {"Operations": [{"Type": "ReplicateAndRegister", "TargetSE": "MARS", "Files": files}]}
    (result,) = await harness.submit(
        data,
        backend_pb2.ParcelSubmission(
            parcel_id=id_to_str(new_id()), request_json=json.dumps(bad), vo="lhcb"
        ),
    )
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert "MARS" in outcome.message


@pytest.mark.parametrize("lfn", ["/../../x", "/lhcb/a\0b", "/lhcb/./a", "//lhcb/a"])
async def test_a_data_parcel_with_a_bad_lfn_ends_failed_naming_it(
    harness: Harness, lfn: str
) -> None:
    """Issue 33, finding 7: an LFN the storage refuses ends the parcel FAILED with a reason
    naming the LFN (it used to raise in the worker and stay running for ever), and its
    cancellation ends too (it used to leave the parcel Completing)."""
    request = {
        "Operations": [
            {"Type": "RemoveReplica", "TargetSE": "TAPE", "Files": [{"LFN": lfn}]}
        ]
    }
    data = backend_pb2.Payload(data=backend_pb2.DataPayload())
    parcel_id = id_to_str(new_id())
    (result,) = await harness.submit(
        data, backend_pb2.ParcelSubmission(parcel_id=parcel_id, request_json=json.dumps(request))
    )
    outcome = await harness.outcome(result.identifier, tries=100)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert repr(lfn) in outcome.message and "\n" not in outcome.message
    await harness.stub.Cancel(
        backend_pb2.CancelRequest(identifiers=[result.identifier], parcel_ids=[parcel_id])
    )
    assert (await harness.outcome(result.identifier, tries=1)).result == outcome.result


async def test_any_error_of_one_parcel_becomes_its_failed_outcome(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever raises while a parcel runs (here the data step itself, as an unforeseen error
    would) is that parcel's FAILED outcome in the error's words, not a stuck job."""
    from dxts.backends.local.logic import data as local_data

    async def broken(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(local_data, "run_request", broken)
    request = {"Operations": [{"Type": "RemoveFile", "Files": [{"LFN": "/lhcb/x"}]}]}
    (result,) = await harness.submit(
        backend_pb2.Payload(data=backend_pb2.DataPayload()),
        backend_pb2.ParcelSubmission(
            parcel_id=id_to_str(new_id()), request_json=json.dumps(request)
        ),
    )
    outcome = await harness.outcome(result.identifier, tries=100)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert outcome.message == "OSError: [Errno 28] No space left on device"


async def test_a_data_parcel_changes_only_files_of_its_own_vo(harness: Harness) -> None:
    """Issue 33, finding 1, at the data adaptor: VO belle's data parcel naming VO lhcb's file
    (alone, or beside its own) fails, class `refused`, naming the file and whose it is, and
    neither file is touched; a parcel that does not say its VO changes nothing either; its own
    file it removes."""
    theirs, mine = "/lhcb/raw/private.raw", "/belle/raw/own.raw"
    for lfn in (theirs, mine):
        path = harness.settings.se_path("LOCAL", lfn)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"data")
    await harness.catalogue.register(
        [CatalogueFile(lfn=lfn, size=4, replicas=("LOCAL",)) for lfn in (theirs, mine)]
    )
    data = backend_pb2.Payload(data=backend_pb2.DataPayload())

    async def remove(vo: str, *lfns: str) -> common_pb2.Outcome:
        request = {"Operations": [{"Type": "RemoveFile", "Files": [{"LFN": x} for x in lfns]}]}
        (result,) = await harness.submit(
            data,
            backend_pb2.ParcelSubmission(
                parcel_id=id_to_str(new_id()), request_json=json.dumps(request), vo=vo
            ),
        )
        return await harness.outcome(result.identifier, tries=100)

    for outcome in (await remove("belle", theirs), await remove("belle", mine, theirs)):
        assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
        assert outcome.message.startswith(
            f"{theirs} is VO lhcb's file: VO belle may change or remove only files under /belle/"
        )
        assert outcome.failure.failure_class == common_pb2.FAILURE_CLASS_REFUSED
    unsaid = await remove("", mine)
    assert unsaid.result == common_pb2.OUTCOME_RESULT_FAILED
    assert "does not say which VO" in unsaid.message
    assert await harness.catalogue.replicas([theirs, mine]) == {
        theirs: ("LOCAL",),
        mine: ("LOCAL",),
    }
    assert harness.settings.se_path("LOCAL", theirs).read_bytes() == b"data"
    assert harness.settings.se_path("LOCAL", mine).read_bytes() == b"data"
    own = await remove("belle", mine)
    assert own.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, own.message
    assert await harness.catalogue.replicas([theirs, mine]) == {theirs: ("LOCAL",)}
    assert not harness.settings.se_path("LOCAL", mine).exists()
