"""What a DiracX job of dxts runs on the worker node: `python -m dxts.backends.diracx.payload`.

The job's working directory holds its unpacked input sandbox: `dxts-payload.binpb` (the
serialised `Payload`: the process tree and the resolved-hints sidecar, shared by the parcels of
one Submit) and `dxts-parcel.binpb` (the parcel's `ParcelSubmission`: its parameters, input ids,
output prefix). The parcel runs with cwltool through the adaptor kit's runner
(`dxts.backends.runner.cwl.run_compute`, the same code as `dxts-backend-local`), in
`dxts-run/`, with the worker's storage elements and file catalogue taken from its environment
(`DXTS_LOCAL_STORAGE_ROOT`, `DXTS_LOCAL_OUTPUT_SE`, `DXTS_CATALOGUE_*`, and
`DXTS_PAYLOAD_STORAGE_ELEMENTS`, colon-separated: DIRAC's JDL parser cannot carry the quotes
of the JSON list `DXTS_LOCAL_STORAGE_ELEMENTS` would need, nor a comma in a list's string; and
`DXTS_PAYLOAD_STORAGE_ENDPOINTS`, the installation's XRootD SEs as `NAME=root://... ...`,
space-separated for the same reason: `DXTS_STORAGE_ENDPOINTS` with spaces for commas, so the job
fetches its `lfn:` inputs from them and uploads its outputs to one, docs/storage.md).
They are the adaptor's `payload_environment`, given to the job as its JDL
`ExecutionEnvironment`.

It writes `dxts-result.json` (the output sandbox the adaptor reads back) whatever happened:
`{"outputs": [OutputFile…], "status_report_json": str, "output_object_json": str,
"usage": {...} | null, "error": str, "exit_code": int | null, "failure": {...} | null}`
(`exit_code`: the exit status of the tool that failed, when one did; `failure`: its class and
the tool's own stderr line, `dxts.core.adaptor.codec.failure_to_json`), `dxts-runner.log` (the
runner's log) and `dxts-tool.stderr` (the tools' stderr), and exits 0 when
the parcel succeeded, 1 otherwise, so DiracX's own status (Done or Failed) agrees with the
result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

from dxts.backends.runner import cwl
from dxts.backends.runner.cwl import JobFailed, Run
from dxts.backends.runner.settings import RunnerEnvironment
from dxts.core.adaptor.codec import (
    decode_payload,
    decode_submission,
    failure_from_json,
    failure_to_json,
)
from dxts.core.adaptor.model import ComputePayload, Failure, OutputFile, ResourceUsage
from dxts.core.catalogue import FileCatalogue, load_catalogue

PAYLOAD_FILE = "dxts-payload.binpb"
PARCEL_FILE = "dxts-parcel.binpb"
RESULT_FILE = "dxts-result.json"
RUNNER_LOG = "dxts-runner.log"
TOOL_STDERR = "dxts-tool.stderr"
RUN_DIR = "dxts-run"
OUTPUT_SANDBOX = (RESULT_FILE, RUNNER_LOG, TOOL_STDERR)
STORAGE_ELEMENTS_VARIABLE = "DXTS_PAYLOAD_STORAGE_ELEMENTS"
STORAGE_ENDPOINTS_VARIABLE = "DXTS_PAYLOAD_STORAGE_ENDPOINTS"


class Result(NamedTuple):
    """A `dxts-result.json` as read back: what the run gave, what it used, why it failed
    (empty when it did not) and the failed tool's exit status (None: none known)."""

    collected: cwl.Collected
    usage: ResourceUsage | None
    error: str
    exit_code: int | None = None
    failure: Failure | None = None


def result_document(
    collected: cwl.Collected,
    usage: ResourceUsage | None,
    error: str,
    exit_code: int | None = None,
    failure: Failure | None = None,
) -> dict[str, Any]:
    return {
        "outputs": [dataclasses.asdict(o) for o in collected.outputs],
        "status_report_json": collected.report,
        "output_object_json": collected.output_object_json,
        "usage": dataclasses.asdict(usage) if usage is not None else None,
        "error": error,
        "exit_code": exit_code,
        "failure": failure_to_json(failure) if failure is not None else None,
    }


def read_result(text: str) -> Result:
    """The `Result` a `dxts-result.json` holds; ValueError if it is not one."""
    document = json.loads(text)
    if not isinstance(document, dict):
        raise ValueError("the result is not a JSON object")
    try:
        outputs = [OutputFile(**o) for o in document["outputs"]]
        usage = ResourceUsage(**document["usage"]) if document.get("usage") is not None else None
    except (KeyError, TypeError) as error:
        raise ValueError(f"the result is malformed: {error}") from None
    collected = cwl.Collected(
        outputs,
        str(document.get("status_report_json") or ""),
        str(document.get("output_object_json") or ""),
    )
    exit_code = document.get("exit_code")
    failure = document.get("failure")
    return Result(
        collected,
        usage,
        str(document.get("error") or ""),
        exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        failure_from_json(failure) if isinstance(failure, dict) else None,
    )


def _runner_settings(run_dir: Path) -> RunnerEnvironment:
    """The runner's settings on this worker: its storage from the environment."""
    names = [n for n in os.environ.get(STORAGE_ELEMENTS_VARIABLE, "").split(":") if n]
    given: dict[str, Any] = {"storage_elements": names} if names else {}
    if endpoints := os.environ.get(STORAGE_ENDPOINTS_VARIABLE, "").split():
        given["storage_endpoints"] = ",".join(endpoints)
    return RunnerEnvironment(work_dir=run_dir, **given)


def _catalogue() -> FileCatalogue | None:
    """The worker's file catalogue, when its environment names one."""
    if not any(name.startswith("DXTS_CATALOGUE_") for name in os.environ):
        return None
    return load_catalogue()


async def run(directory: Path) -> dict[str, Any]:
    payload = decode_payload((directory / PAYLOAD_FILE).read_bytes())
    parcel = decode_submission((directory / PARCEL_FILE).read_bytes())
    if not isinstance(payload, ComputePayload):
        return result_document(
            cwl.Collected([]), None, "the job's payload is not a compute payload"
        )
    run_dir = directory / RUN_DIR
    run_dir.mkdir(exist_ok=True)
    settings = _runner_settings(run_dir)
    catalogue = _catalogue()
    progress = Run()
    if catalogue is not None:
        await catalogue.start()
    try:
        collected = await cwl.run_compute(
            run_dir, payload, parcel, settings, catalogue, progress, _ignore
        )
        return result_document(collected, progress.usage, "")
    except JobFailed as error:
        return result_document(
            cwl.Collected([]), progress.usage, str(error), error.exit_code, error.failure
        )
    finally:
        if catalogue is not None:
            await catalogue.close()
        for kept, sent in ((cwl.RUNNER_LOG, RUNNER_LOG), (cwl.TOOL_STDERR, TOOL_STDERR)):
            if (run_dir / kept).exists():
                (directory / sent).write_bytes((run_dir / kept).read_bytes())


async def _ignore(_group: int) -> None:
    """The runner's process group: a DiracX job is killed by its pilot, not by dxts."""


def main() -> None:
    directory = Path.cwd()
    result = asyncio.run(run(directory))
    (directory / RESULT_FILE).write_text(json.dumps(result))
    if result["error"]:
        print(f"dxts payload failed: {result['error']}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
