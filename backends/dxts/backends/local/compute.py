"""Running one compute parcel with the CWL runner (cwltool), for real.

In the parcel's directory (`jobs/<identifier>/`, kept afterwards as its output sandbox):

* `process/<hex>.cwl` — every process of the payload's tree; a `run: proc:sha256-<hex>`
  reference becomes the sibling file `<hex>.cwl`, so the runner fetches nothing;
* `resolved-hints.json` — the sidecar the parcel runs under;
* `job.json` — the parcel's input object, with `lfn:` inputs staged (below) and, when the root
  process declares an input named `dxts-input-ids`, the ids of the inputs the parcel carries;
* `runner.log` — the runner's stderr (its log and the tool's stderr), `runner.out` — its stdout
  (the output object), `out/` and `tmp/` — its output and scratch directories;
* `usage.json` — what the run used (CPU, wall time, peak memory), written by the wrapper the
  runner is started through (`dxts.backends.local.measure`) and reported as the outcome's
  `usage`, whether the run succeeded or failed.

Staging: a File in the input object whose `location` (or `path`) is `lfn:<LFN>` is replaced by
the replica of that LFN at one of this adaptor's storage elements, found through the file
catalogue. Outputs: every File of the output object (singly or in arrays) is moved to the output
storage element under `<output prefix>/<basename>` and reported in the manifest with its LFN,
size and adler32 checksum; the output with id `status-report` is the status report (DISPATCH.md):
its JSON content is returned as the outcome's report instead of being stored. A runner that
exits non-zero is a FAILED outcome; a parcel cancelled while running has its process group
killed and ends CANCELLED.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dxts.backends.local.settings import LocalSettings
from dxts.core.adaptor.model import ComputePayload, OutputFile, ResourceUsage, Submission
from dxts.core.catalogue import FileCatalogue

STATUS_REPORT_OUTPUT = "status-report"
INPUT_IDS_INPUT = "dxts-input-ids"
REFERENCE_PREFIX = "proc:sha256-"
LOG_TAIL = 2000
USAGE_FILE = "usage.json"
# The runner's stdout (the output object) and stderr (its log and the tool's stderr).
RUNNER_STDOUT = "runner.out"
RUNNER_LOG = "runner.log"
MEASURE = [sys.executable, "-m", "dxts.backends.local.measure"]


class JobFailed(Exception):
    """The parcel cannot run or its result cannot be used: a FAILED outcome with this message."""


@dataclass
class Run:
    """One running parcel: the process group to kill on a cancellation, and what the run used
    once it ended (None: not measured)."""

    process: asyncio.subprocess.Process | None = None
    cancelled: bool = False
    usage: ResourceUsage | None = None


def read_usage(path: Path) -> ResourceUsage | None:
    """The usage the wrapper wrote (`measure`), or None when there is none to be had (the run
    never started, or was killed before it could be written)."""
    try:
        written = json.loads(path.read_text())
        return ResourceUsage(
            cpu_seconds=float(written["cpu_seconds"]),
            wall_seconds=float(written["wall_seconds"]),
            max_memory_bytes=int(written["max_memory_bytes"]),
        )
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _rewrite(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "run" and isinstance(item, str) and item.startswith(REFERENCE_PREFIX):
                item = f"{item.removeprefix(REFERENCE_PREFIX)}.cwl"
            out[key] = _rewrite(item)
        return out
    if isinstance(value, list):
        return [_rewrite(item) for item in value]
    return value


def materialise(payload: ComputePayload, directory: Path) -> Path:
    """Write the process tree; returns the root document's file."""
    directory.mkdir(parents=True, exist_ok=True)
    for process in payload.processes:
        body = json.loads(process.document_json)
        if isinstance(body, dict):
            body.setdefault("cwlVersion", "v1.2")
        (directory / f"{process.process_id}.cwl").write_text(json.dumps(_rewrite(body), indent=1))
    return directory / f"{payload.process_id}.cwl"


def _declares_input(payload: ComputePayload, name: str) -> bool:
    root = next(p for p in payload.processes if p.process_id == payload.process_id)
    inputs = json.loads(root.document_json).get("inputs") or []
    if isinstance(inputs, dict):
        return name in inputs
    return any(
        isinstance(item, dict) and item.get("id", "").split("#")[-1] == name for item in inputs
    )


async def stage(value: Any, settings: LocalSettings, catalogue: FileCatalogue | None) -> Any:
    """The input object with every `lfn:` File pointing at a local replica."""
    wanted: set[str] = set()

    def collect(item: Any) -> None:
        if isinstance(item, dict):
            if item.get("class") == "File":
                location = item.get("location") or item.get("path") or ""
                if isinstance(location, str) and location.startswith("lfn:"):
                    wanted.add(location.removeprefix("lfn:"))
            for child in item.values():
                collect(child)
        elif isinstance(item, list):
            for child in item:
                collect(child)

    collect(value)
    if not wanted:
        return value
    if catalogue is None:
        raise JobFailed("lfn: inputs need a file catalogue, and none is configured")
    replicas = await catalogue.replicas(sorted(wanted))
    local: dict[str, Path] = {}
    for lfn in sorted(wanted):
        for se in replicas.get(lfn, ()):
            if se in settings.storage_elements and settings.se_path(se, lfn).is_file():
                local[lfn] = settings.se_path(se, lfn)
                break
        else:
            raise JobFailed(
                f"cannot stage lfn:{lfn}: no replica at {', '.join(settings.storage_elements)} "
                f"(catalogue replicas: {', '.join(replicas.get(lfn, ())) or 'none'})"
            )

    def rewrite(item: Any) -> Any:
        if isinstance(item, dict):
            out = {key: rewrite(child) for key, child in item.items()}
            location = item.get("location") or item.get("path") or ""
            if item.get("class") == "File" and str(location).startswith("lfn:"):
                out.pop("path", None)
                out["location"] = local[str(location).removeprefix("lfn:")].as_uri()
            return out
        if isinstance(item, list):
            return [rewrite(child) for child in item]
        return item

    return rewrite(value)


def adler32(path: Path) -> str:
    checksum = 1
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            checksum = zlib.adler32(chunk, checksum)
    return f"adler32:{checksum:08x}"


def _files(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict) and value.get("class") == "File":
        return [value]
    if isinstance(value, dict) and value.get("class") == "Directory":
        raise JobFailed("directory outputs are not supported by the local backend")
    if isinstance(value, list):
        return [f for item in value for f in _files(item)]
    return []


def collect_outputs(
    output_object: dict[str, Any], submission: Submission, settings: LocalSettings
) -> tuple[list[OutputFile], str]:
    """Move the outputs to the output storage element; (manifest, status report JSON)."""
    assert settings.output_se is not None
    report = ""
    manifest = []
    taken: set[str] = set()
    for name, value in sorted(output_object.items()):
        files = _files(value)
        if name == STATUS_REPORT_OUTPUT:
            for file in files[:1]:
                text = Path(file["path"]).read_text()
                try:
                    json.loads(text)
                except ValueError as error:
                    raise JobFailed(f"the status report is not JSON: {error}") from None
                report = text
            continue
        for file in files:
            source = Path(file["path"])
            lfn = f"{submission.output_prefix.rstrip('/')}/{source.name}"
            if lfn in taken:
                raise JobFailed(f"two outputs would both be {lfn}")
            taken.add(lfn)
            target = settings.se_path(settings.output_se, lfn)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(source, target)
            manifest.append(
                OutputFile(
                    output_name=name,
                    lfn=lfn,
                    size=target.stat().st_size,
                    checksum=adler32(target),
                    storage_element=settings.output_se,
                )
            )
    return manifest, report


async def input_object(
    payload: ComputePayload,
    submission: Submission,
    settings: LocalSettings,
    catalogue: FileCatalogue | None,
) -> dict[str, Any]:
    """The parcel's CWL input object as the runner gets it: `lfn:` inputs staged, and the ids of
    the inputs it carries when the root process declares `dxts-input-ids`."""
    parameters = json.loads(submission.parameters_json) if submission.parameters_json else {}
    if not isinstance(parameters, dict):
        raise JobFailed("the parameters are not a CWL input object")
    parameters = await stage(parameters, settings, catalogue)
    if _declares_input(payload, INPUT_IDS_INPUT):
        parameters[INPUT_IDS_INPUT] = list(submission.input_ids)
    return parameters


async def run_compute(
    job_dir: Path,
    payload: ComputePayload,
    submission: Submission,
    settings: LocalSettings,
    catalogue: FileCatalogue | None,
    run: Run,
    started: Callable[[int], Awaitable[None]],
) -> tuple[list[OutputFile], str]:
    """Run the parcel; (manifest, status report) on success, JobFailed otherwise."""
    root = materialise(payload, job_dir / "process")
    (job_dir / "resolved-hints.json").write_text(payload.resolved_hints_json or "{}")
    parameters = await input_object(payload, submission, settings, catalogue)
    (job_dir / "job.json").write_text(json.dumps(parameters, indent=1))
    out, tmp = job_dir / "out", job_dir / "tmp"
    out.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    usage_file = job_dir / USAGE_FILE
    usage_file.unlink(missing_ok=True)  # a previous attempt's
    command = [
        *MEASURE,
        str(usage_file),
        "--",
        *settings.runner,
        *settings.runner_args,
        "--outdir",
        str(out),
        "--tmpdir-prefix",
        f"{tmp}/",
        "--tmp-outdir-prefix",
        f"{tmp}/",
        str(root),
        str(job_dir / "job.json"),
    ]
    if run.cancelled:
        return [], ""
    with (job_dir / RUNNER_STDOUT).open("wb") as stdout, (job_dir / RUNNER_LOG).open("wb") as log:
        run.process = await asyncio.create_subprocess_exec(
            *command, cwd=job_dir, stdout=stdout, stderr=log, start_new_session=True
        )
        if run.cancelled:  # cancelled while the process was being started
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.process.pid, signal.SIGKILL)
        await started(run.process.pid)
        code = await run.process.wait()
    run.usage = read_usage(usage_file)
    if run.cancelled:
        return [], ""
    if code != 0:
        tail = (job_dir / RUNNER_LOG).read_text(errors="replace")[-LOG_TAIL:]
        raise JobFailed(f"the CWL runner exited with {code}: {tail}")
    try:
        output_object = json.loads((job_dir / RUNNER_STDOUT).read_text())
    except ValueError as error:
        raise JobFailed(f"the CWL runner's output object is not JSON: {error}") from None
    return collect_outputs(output_object, submission, settings)


async def kill(run: Run, grace_s: float) -> None:
    """Stop a running parcel: SIGTERM to its process group, SIGKILL after `grace_s`."""
    run.cancelled = True
    process = run.process
    if process is None or process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), timeout=grace_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
