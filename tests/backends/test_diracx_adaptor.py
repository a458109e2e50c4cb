"""The DiracX adaptor against a real DiracX 0.7.0 server (started by the tests, `scripts/diracx`),
with a test pilot running its jobs through DiracX's API: a parcel becomes a job and ends
SUCCEEDED with its outputs; a failing payload ends FAILED with DiracX's status and reason; a kill
ends CANCELLED; a job stalled or deleted in DiracX is reported lost; a crash between DiracX
accepting a job and the adaptor recording it never makes a second job; the adaptor's token is
traded again before it expires."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import tarfile
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from diracx_fixture import DiracXServer, TestPilot, running_diracx
from xrootd_servers import data_path, endpoints

from dxts.backends.diracx import plugin as diracx_plugin
from dxts.backends.diracx.edge.client import DiracXClient
from dxts.backends.diracx.logic import jdl
from dxts.backends.diracx.logic.adaptor import DiracXAdaptor
from dxts.backends.diracx.payload import STORAGE_ENDPOINTS_VARIABLE
from dxts.backends.diracx.settings import DiracXPolicy
from dxts.backends.plugins import Site
from dxts.cli.adaptor_conformance import FAILING_TOOL, failing_script
from dxts.core.adaptor.model import (
    ComputePayload,
    Failure,
    FailureClass,
    Outcome,
    OutcomeResult,
    ProcessDocument,
    Submission,
    SubmitDisposition,
    SubmitResult,
)
from dxts.core.errors import Unavailable
from dxts.core.ids import content_hash, hash_to_str, id_to_str, new_id

PYTHON = sys.executable
SE = "TEST-SE"
WRITE = """
import json, sys
message, ids = sys.argv[1], sys.argv[2:]
open("result.txt", "w").write(message)
open("report.json", "w").write(json.dumps({i: {"action": "SUCCESS"} for i in ids}))
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
    "baseCommand": [PYTHON, "-c", "import sys; print('broken tool', file=sys.stderr); sys.exit(3)"],
    "inputs": {},
    "outputs": {},
}
SLEEPER = {
    "class": "CommandLineTool",
    "baseCommand": [PYTHON, "-c", "import time; time.sleep(300)"],
    "inputs": {},
    "outputs": {},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiracXServer]:
    with running_diracx(tmp_path_factory.mktemp("diracx")) as running:
        yield running


def site_environment(tmp_path: Path) -> dict[str, str]:
    """What the worker node's payload is told (the adaptor's payload_environment)."""
    return {
        "DXTS_LOCAL_STORAGE_ROOT": str(tmp_path / "se"),
        "DXTS_PAYLOAD_STORAGE_ELEMENTS": SE,
        "DXTS_LOCAL_OUTPUT_SE": SE,
    }


@pytest.fixture
async def adaptor(server: DiracXServer, tmp_path: Path) -> AsyncIterator[DiracXAdaptor]:
    settings = server.adaptor_settings(
        tmp_path / "adaptor",
        payload_environment=site_environment(tmp_path),
        policy=DiracXPolicy(cpu_power=10, max_memory_mb=8192, banned_sites=["LCG.Broken.ch"]),
    )
    running = DiracXAdaptor(settings, DiracXClient.for_settings(settings))
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def pilot(server: DiracXServer, tmp_path: Path) -> AsyncIterator[TestPilot]:
    running = TestPilot(server, tmp_path / "pilot", {})
    yield running
    await running.close()


def compute_payload(process: dict[str, Any]) -> ComputePayload:
    process_id = hash_to_str(content_hash(process))
    return ComputePayload(
        process_id=process_id,
        processes=(ProcessDocument(process_id=process_id, document_json=json.dumps(process)),),
        resolved_hints_id="h",
        resolved_hints_json="{}",
    )


def parcel(
    parameters: dict[str, Any] | None = None,
    *,
    requirements: dict[str, Any] | None = None,
    input_ids: list[str] | None = None,
) -> Submission:
    parcel_id = id_to_str(new_id())
    return Submission(
        parcel_id=parcel_id,
        parameters_json=json.dumps(parameters or {}),
        requirements_json=json.dumps(requirements) if requirements else "",
        output_prefix=f"/dxts/test/{parcel_id}",
        input_ids=tuple(input_ids or ()),
    )


async def submit(
    adaptor: DiracXAdaptor, process: dict[str, Any], *parcels: Submission
) -> list[SubmitResult]:
    return await adaptor.submit(compute_payload(process), list(parcels))


async def job_of(adaptor: DiracXAdaptor, parcel_id: str) -> int:
    job = (await adaptor.state.by_parcel([parcel_id]))[parcel_id]
    assert job.job_id is not None
    return job.job_id


async def jobs_named(server: DiracXServer, parcel_id: str) -> list[int]:
    admin = server.client("admin")
    try:
        rows = await admin.search(
            [{"parameter": "JobName", "operator": "eq", "value": jdl.job_name(parcel_id)}],
            ["JobID"],
        )
    finally:
        await admin.close()
    return [int(row["JobID"]) for row in rows]


async def poll_one(adaptor: DiracXAdaptor, identifier: str) -> Outcome:
    (outcome,) = (await adaptor.poll([identifier])).outcomes
    return outcome


async def test_a_parcel_becomes_a_job_the_pilot_runs_and_it_succeeds_with_its_outputs(
    server: DiracXServer, adaptor: DiracXAdaptor, pilot: TestPilot, tmp_path: Path
) -> None:
    inputs = [id_to_str(new_id()), id_to_str(new_id())]
    submitted = parcel(
        {"message": "hello"},
        requirements={"cpu_hours": 1, "memory_gb": 2, "cores": 2, "sites": ["LCG.Test.ch"]},
        input_ids=inputs,
    )
    (result,) = await submit(adaptor, WRITER, submitted)
    assert result.disposition == SubmitDisposition.ACCEPTED, result.reason
    job_id = await job_of(adaptor, submitted.parcel_id)
    described = server.jdl(job_id)
    assert described["JobName"] == f"dxts-{submitted.parcel_id}"
    assert described["CPUTime"] == 36000  # 1 h at 10 HS06
    assert described["MaxRAM"] == 2048
    assert described["NumberOfProcessors"] == 2
    assert described["Site"] == "LCG.Test.ch"
    assert described["BannedSites"] == "LCG.Broken.ch"
    assert (await adaptor.poll([result.identifier])).outcomes == []  # under way

    (run,) = await pilot.run_waiting()
    assert (run.job_id, run.exit_code) == (job_id, 0)
    outcome = await poll_one(adaptor, result.identifier)
    assert outcome.result == OutcomeResult.SUCCEEDED, outcome.message
    assert (outcome.parcel_id, outcome.identifier) == (submitted.parcel_id, result.identifier)
    assert outcome.backend_status.startswith("Done")
    assert json.loads(outcome.status_report_json) == {i: {"action": "SUCCESS"} for i in inputs}
    (output,) = outcome.outputs
    assert (output.output_name, output.storage_element) == ("output-data", SE)
    assert output.lfn == f"{submitted.output_prefix}/result.txt"
    assert (tmp_path / "se" / SE / output.lfn.lstrip("/")).read_text() == "hello"
    assert outcome.usage is not None
    assert (outcome.usage.cpu_seconds or 0) > 0 and (outcome.usage.max_memory_bytes or 0) > 0
    # Answered again from the adaptor's own record; a second Submit starts nothing.
    assert await poll_one(adaptor, result.identifier) == outcome
    (again,) = await submit(adaptor, WRITER, submitted)
    assert again.identifier == result.identifier
    assert await jobs_named(server, submitted.parcel_id) == [job_id]
    described_counters = (await adaptor.describe()).counters
    assert described_counters["repeated_submits"] == 1


async def test_a_failing_payload_ends_failed_with_diracx_status_and_the_reason(
    adaptor: DiracXAdaptor, pilot: TestPilot
) -> None:
    submitted = parcel()
    (result,) = await submit(adaptor, FAILING, submitted)
    (run,) = await pilot.run_waiting()
    assert run.exit_code == 1
    outcome = await poll_one(adaptor, result.identifier)
    assert outcome.result == OutcomeResult.FAILED
    assert outcome.backend_status.startswith("Failed: Application Finished With Errors")
    assert f"DiracX job {run.job_id} Failed" in outcome.message
    assert outcome.message.endswith("the tool exited with 3: broken tool")
    assert outcome.exit_code == 3  # the tool's, not the runner's nor the job's


async def test_a_failing_tool_s_class_and_own_line_come_back_from_the_worker(
    adaptor: DiracXAdaptor, pilot: TestPilot
) -> None:
    marked = "Exception in thread main: java.lang.IllegalStateException: no beam energy"
    (result,) = await submit(adaptor, FAILING_TOOL, parcel({"script": failing_script(marked, 4)}))
    await pilot.run_waiting()
    outcome = await poll_one(adaptor, result.identifier)
    assert outcome.result == OutcomeResult.FAILED
    assert outcome.failure == Failure(FailureClass.APPLICATION_ERROR, tool_message=marked)
    assert outcome.exit_code == 4


async def test_a_cancelled_parcel_is_killed_in_diracx_and_ends_cancelled(
    adaptor: DiracXAdaptor, pilot: TestPilot
) -> None:
    waiting, running = parcel(), parcel()
    results = await submit(adaptor, SLEEPER, waiting, running)
    running_job = await job_of(adaptor, running.parcel_id)
    await pilot.match(running_job)
    await adaptor.cancel([r.identifier for r in results], [])
    run = await pilot.run(running_job)  # the heartbeat brings DiracX's Kill: the payload dies
    assert "Kill" in run.commands
    for result in results:
        outcome = await poll_one(adaptor, result.identifier)
        assert outcome.result == OutcomeResult.CANCELLED
        assert outcome.backend_status.startswith("Killed")
    assert await pilot.waiting() == []


async def test_a_kill_that_crossed_the_pilots_own_update_is_sent_again_until_it_takes(
    adaptor: DiracXAdaptor, pilot: TestPilot
) -> None:
    submitted = parcel()
    (result,) = await submit(adaptor, SLEEPER, submitted)
    job_id = await job_of(adaptor, submitted.parcel_id)
    await pilot.match(job_id)
    await pilot.report_running_ahead(job_id, seconds=2)
    await adaptor.cancel([result.identifier], [])
    assert await pilot.status(job_id) == "Running"  # DiracX logged the Kill, did not apply it
    outcomes: list[Outcome] = []
    for _ in range(60):
        outcomes = (await adaptor.poll([result.identifier])).outcomes
        if outcomes:
            break
        await asyncio.sleep(0.25)
    (outcome,) = outcomes
    assert outcome.result == OutcomeResult.CANCELLED, outcome.message
    assert await pilot.status(job_id) == "Killed"


async def test_a_key_cancelled_before_it_was_accepted_is_refused_afterwards(
    adaptor: DiracXAdaptor,
) -> None:
    never = parcel()
    reply = await adaptor.cancel([], [never.parcel_id])
    assert [(k.parcel_id, k.identifier) for k in reply.keys] == [(never.parcel_id, "")]
    (result,) = await submit(adaptor, WRITER, never)
    assert result.disposition == SubmitDisposition.REFUSED


async def test_jobs_stalled_or_deleted_in_diracx_are_reported_lost(
    adaptor: DiracXAdaptor, pilot: TestPilot
) -> None:
    stalled, deleted = parcel(), parcel()
    stalled_result, deleted_result = await submit(adaptor, SLEEPER, stalled, deleted)
    stalled_job = await job_of(adaptor, stalled.parcel_id)
    deleted_job = await job_of(adaptor, deleted.parcel_id)
    await pilot.match(stalled_job)
    await pilot.pilot.set_status([stalled_job], "Stalled", "Job stalled: pilot not running")
    await pilot.admin.set_status([deleted_job], "Deleted", "deleted by an operator")

    lost = await poll_one(adaptor, stalled_result.identifier)
    assert lost.result == OutcomeResult.FAILED
    assert lost.message.startswith(f"lost: DiracX job {stalled_job} Stalled")
    assert await pilot.status(stalled_job) == "Killed"  # it cannot come back beside its retry
    gone = await poll_one(adaptor, deleted_result.identifier)
    assert gone.result == OutcomeResult.FAILED
    assert gone.message.startswith(f"lost: DiracX job {deleted_job} Deleted")
    assert lost.failure == gone.failure == Failure(FailureClass.LOST)


async def test_a_crash_between_diracx_accepting_and_the_adaptor_recording_makes_one_job(
    server: DiracXServer, adaptor: DiracXAdaptor, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    submitted = parcel({"message": "once"})

    async def crash(job_ids: dict[str, int]) -> None:
        if job_ids:  # DiracX has just accepted the job
            raise Unavailable("the adaptor died here")

    monkeypatch.setattr(adaptor.state, "record_jobs", crash)
    with pytest.raises(Unavailable):
        await submit(adaptor, WRITER, submitted)
    monkeypatch.undo()
    (first_job,) = await jobs_named(server, submitted.parcel_id)  # DiracX has the job
    await adaptor.stop()

    restarted = DiracXAdaptor(  # the same state, a new process
        adaptor.settings, DiracXClient.for_settings(adaptor.settings)
    )
    await restarted.start()
    try:
        (result,) = await submit(restarted, WRITER, submitted)
        assert result.disposition == SubmitDisposition.ACCEPTED
        assert await jobs_named(server, submitted.parcel_id) == [first_job]
        assert await job_of(restarted, submitted.parcel_id) == first_job
        counters = (await restarted.describe()).counters
        assert (counters["jobs_found_again"], counters["jobs_created"]) == (1, 0)
    finally:
        await restarted.stop()
        await adaptor.start()  # the fixture stops it again


async def test_requirements_beyond_the_policy_are_refused(adaptor: DiracXAdaptor) -> None:
    too_big = parcel(requirements={"memory_gb": 64})
    (result,) = await submit(adaptor, WRITER, too_big)
    assert result.disposition == SubmitDisposition.REFUSED
    assert "at most 8192 allowed" in result.reason


async def test_the_token_is_traded_again_before_it_expires(server: DiracXServer) -> None:
    now = [0.0]
    client = server.client(refresh_margin_s=60, clock=lambda: now[0])
    try:
        first = await client.token()
        again = await client.token()
        assert (again, client.exchanges) == (first, 1)
        now[0] = 20 * 60 - 59  # DiracX's tokens last 20 minutes: within the margin now
        renewed = await client.token()
        assert (renewed != first, client.exchanges) == (True, 2)
        await client.search([], ["JobID"])  # and the new one is accepted
    finally:
        await client.close()


async def test_an_error_with_one_parcel_of_a_submit_is_its_failed_outcome(
    adaptor: DiracXAdaptor,
) -> None:
    """Whatever raises for one parcel before DiracX is asked (here its requirements, which are
    not JSON) is that parcel's FAILED outcome in the error's own words: the Submit is not
    failed whole, the other parcel becomes its job, and a repeated Submit answers the same."""
    broken, good = parcel(), parcel()
    broken = dataclasses.replace(broken, requirements_json="{")
    results = await submit(adaptor, WRITER, broken, good)
    assert [r.disposition for r in results] == [SubmitDisposition.ACCEPTED] * 2
    failed = await poll_one(adaptor, results[0].identifier)
    assert (failed.result, failed.backend_status) == (OutcomeResult.FAILED, "NOT_SUBMITTED")
    assert failed.message.startswith("JSONDecodeError: Expecting property name")
    assert failed.failure == Failure(FailureClass.SETUP_ERROR)
    assert await job_of(adaptor, good.parcel_id)
    assert (await submit(adaptor, WRITER, broken))[0].identifier == results[0].identifier


async def test_an_error_reading_one_job_s_end_is_its_failed_outcome_and_the_poll_goes_on(
    adaptor: DiracXAdaptor, pilot: TestPilot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever raises reading one ended job (here its output sandbox, which is no archive)
    is that parcel's FAILED outcome in the error's words; the Poll answers for the other."""
    unreadable, readable = parcel(), parcel()
    results = await submit(adaptor, FAILING, unreadable, readable)
    unreadable_job = await job_of(adaptor, unreadable.parcel_id)
    await pilot.run_waiting()
    read = adaptor._result

    async def breaking(job_id: int) -> dict[str, bytes]:
        if job_id == unreadable_job:
            raise tarfile.ReadError("file could not be opened successfully")
        return await read(job_id)

    monkeypatch.setattr(adaptor, "_result", breaking)
    reply = await adaptor.poll([r.identifier for r in results])
    ended = {o.identifier: o for o in reply.outcomes}
    failed, other = ended[results[0].identifier], ended[results[1].identifier]
    assert failed.result == other.result == OutcomeResult.FAILED
    assert failed.message == (
        f"DiracX job {unreadable_job} Failed; its outcome cannot be read: "
        "ReadError: file could not be opened successfully"
    )
    assert failed.failure is not None
    assert failed.failure.tool_message == "ReadError: file could not be opened successfully"
    assert other.message.endswith("the tool exited with 3: broken tool")


async def test_a_job_uploads_its_outputs_to_the_installation_s_xrootd_se(
    server: DiracXServer, pilot: TestPilot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The installation's XRootD SEs reach the job in its JDL-safe environment (the plugin's
    `DXTS_PAYLOAD_STORAGE_ENDPOINTS`), and the job uploads its output there (a real server)."""
    folder = f"diracx-test/{id_to_str(new_id())}"
    servers = endpoints()
    monkeypatch.setenv("DXTS_STORAGE_ENDPOINTS", f"XRD-B={servers['XRD-B']}/{folder}")
    site = Site(data_dir=tmp_path, catalogue=None, storage_root=tmp_path / "se",
                storage_elements=("XRD-B",), url=server.url)  # fmt: skip
    environment = diracx_plugin.settings(site).payload_environment
    assert environment[STORAGE_ENDPOINTS_VARIABLE] == f"XRD-B={servers['XRD-B']}/{folder}"
    settings = server.adaptor_settings(tmp_path / "adaptor", payload_environment=environment)
    adaptor = DiracXAdaptor(settings, DiracXClient.for_settings(settings))
    await adaptor.start()
    try:
        submitted = parcel({"message": "uploaded"})
        (result,) = await submit(adaptor, WRITER, submitted)
        # Its own job: an earlier test's may still wait in the shared server.
        run = await pilot.run(await job_of(adaptor, submitted.parcel_id))
        assert run.exit_code == 0
        outcome = await poll_one(adaptor, result.identifier)
    finally:
        await adaptor.stop()
    assert outcome.result == OutcomeResult.SUCCEEDED, outcome.message
    (output,) = outcome.outputs
    assert output.storage_element == "XRD-B"
    assert data_path("XRD-B", f"/dxts/{folder}{output.lfn}").read_text() == "uploaded"
    assert output.checksum == f"adler32:{zlib.adler32(b'uploaded'):08x}"
