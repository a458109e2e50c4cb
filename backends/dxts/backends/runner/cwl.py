"""Running one compute parcel with the CWL runner (cwltool), for real.

In the parcel's directory (`jobs/<identifier>/`, kept afterwards as its output sandbox):

* `process/<hex>.cwl` — every process of the payload's tree; a `run: proc:sha256-<hex>`
  reference becomes the sibling file `<hex>.cwl`, so the runner fetches nothing;
* `resolved-hints.json` — the sidecar the parcel runs under;
* `job.json` — the parcel's input object, with `lfn:` inputs staged (below) and, when the root
  process declares an input named `dxts-input-ids`, the ids of the inputs the parcel carries;
* `runner.log` — the runner's stderr (its log), `tool.stderr` — the stderr of the tools it ran
  (the default runner keeps them apart: `cwltool_main`), `runner.out` — its stdout (the output
  object), `out/` and `tmp/` — its output and scratch directories;
* `usage.json` — what the run used (CPU, wall time, peak memory), written by the wrapper the
  runner is started through (`dxts.backends.runner.measure`) and reported as the outcome's
  `usage`, whether the run succeeded or failed.

Staging: a File in the input object whose `location` (or `path`) is `lfn:<LFN>` is replaced by
the replica of that LFN at one of this adaptor's storage elements, found through the file
catalogue. Outputs (`collect_outputs`): every File and Directory of the output object, wherever
it is (arrays, records, secondaryFiles, a Directory's listing), is moved to the output storage
element under `<output prefix>/<its path under out/>` (uploaded to it when it is an XRootD SE:
`stage_out`), each stored file reported in the manifest with its LFN, size and adler32
checksum, and the output object itself comes back with their locations `lfn:<LFN>` (everything
else as the runner gave it); the output with id
`status-report` is the status report (docs/cwl.md): its JSON content is returned as the
outcome's report instead of being stored. A runner that exits non-zero is a FAILED outcome
classified by `failures.runner_failed` (an application error with the exit status of the tool
that failed as its `exit_code` and the tool's own stderr line, when the runner's log names one);
a parcel cancelled while running has its process group killed and ends CANCELLED.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dxts.backends.runner import sandbox, stage_out
from dxts.backends.runner.cwltool_main import TOOL_STDERR_VARIABLE
from dxts.backends.runner.failures import (
    TOOL_STDERR,
    JobFailed,
    payload_exit_code,
    runner_failed,
)
from dxts.backends.runner.fetch import endpoints_of, stage
from dxts.backends.runner.sandbox import local_path
from dxts.backends.runner.settings import RunnerSettings, Storage
from dxts.core.adaptor.model import (
    SCHEMAS_FIELD,
    ComputePayload,
    Failure,
    FailureClass,
    OutputFile,
    ResourceUsage,
    Submission,
)
from dxts.core.catalogue import FileCatalogue
from dxts.core.transfers import adler32_of as adler32

STATUS_REPORT_OUTPUT = "status-report"
INPUT_IDS_INPUT = "dxts-input-ids"
REFERENCE_PREFIX = "proc:sha256-"
USAGE_FILE = "usage.json"
# The runner's stdout (the output object) and stderr (its log and the tool's stderr).
RUNNER_STDOUT = "runner.out"
RUNNER_LOG = "runner.log"
MEASURE = [sys.executable, "-m", "dxts.backends.runner.measure"]
__all__ = [
    "TOOL_STDERR",
    "JobFailed",
    "payload_exit_code",
]  # where every adaptor has imported them from


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


def _default_files(value: Any, directory: Path, relative: str) -> Any:
    """`value` with every File literal inside a `default` written as a file under `directory`
    and located there (`relative`: `directory` from the process file), its `contents` kept.

    The definition service stores a default File that was beside the document as a literal,
    so that the process stands alone; written back as a file it is what it was beside the
    document: a runner stages a literal in a scratch directory it removes once the tool has
    run, so a tool that passes its input through as an output (a record echoed back) would
    name a file that is gone."""
    written: list[Path] = []

    def literal_to_file(item: Any) -> Any:
        if isinstance(item, list):
            return [literal_to_file(child) for child in item]
        if not isinstance(item, dict):
            return item
        out = {key: literal_to_file(child) for key, child in item.items()}
        contents = item.get("contents")
        located = "location" in item or "path" in item
        if item.get("class") == "File" and isinstance(contents, str) and not located:
            name = str(item.get("basename") or "literal")
            path = directory / str(len(written)) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(contents, encoding="utf-8")
            written.append(path)
            out["location"] = quote(f"{relative}/{len(written) - 1}/{name}")
        return out

    def visit(item: Any) -> Any:
        if isinstance(item, list):
            return [visit(child) for child in item]
        if not isinstance(item, dict):
            return item
        return {
            key: literal_to_file(child) if key == "default" else visit(child)
            for key, child in item.items()
        }

    return visit(value)


def _schemas_beside(body: dict[str, Any], directory: Path, relative: str) -> dict[str, Any]:
    """`body` with each ontology it carries written under `directory` (keeping its name, by
    which the runner guesses its format) and its `$schemas` entry naming that file."""
    texts = body.pop(SCHEMAS_FIELD, None)
    names = body.get("$schemas")
    if not isinstance(texts, dict):
        return body
    located = []
    for n, name in enumerate([names] if isinstance(names, str) else names or []):
        text = texts.get(name) if isinstance(name, str) else None
        if not isinstance(text, str):
            located.append(name)
            continue
        file_name = name.rstrip("/").rsplit("/", 1)[-1] or "schema"
        path = directory / str(n) / file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        located.append(quote(f"{relative}/{n}/{file_name}"))
    return {**body, "$schemas": located}


def materialise(payload: ComputePayload, directory: Path) -> Path:
    """Write the process tree, each process's default Files (`<hex>.files/`) and `$schemas`
    ontologies (`<hex>.schemas/`) beside it; returns the root document's file."""
    directory.mkdir(parents=True, exist_ok=True)
    for process in payload.processes:
        body = json.loads(process.document_json)
        if isinstance(body, dict):
            body.setdefault("cwlVersion", "v1.2")
            schemas = f"{process.process_id}.schemas"
            body = _schemas_beside(body, directory / schemas, schemas)
        files = f"{process.process_id}.files"
        body = _default_files(body, directory / files, files)
        # UTF-8, not ASCII escapes: the runner's YAML loader reads an escaped non-BMP character
        # (a JSON surrogate pair) as two lone surrogates.
        text = json.dumps(_rewrite(body), indent=1, ensure_ascii=False)
        (directory / f"{process.process_id}.cwl").write_text(text, encoding="utf-8")
    return directory / f"{payload.process_id}.cwl"


def _declares_input(payload: ComputePayload, name: str) -> bool:
    root = next(p for p in payload.processes if p.process_id == payload.process_id)
    inputs = json.loads(root.document_json).get("inputs") or []
    if isinstance(inputs, dict):
        return name in inputs
    return any(
        isinstance(item, dict) and item.get("id", "").split("#")[-1] == name for item in inputs
    )


@dataclass
class Collected:
    """What a finished run gives its outcome: the manifest of stored files, the status report
    (JSON text, or empty) and the output object with every File and Directory at its LFN."""

    outputs: list[OutputFile]
    report: str = ""
    output_object_json: str = ""


class _Placement:
    """Where each File and Directory of an output object goes: `<output prefix>/<its path under
    the output directory>` (its basename when the runner left it elsewhere), so a Directory's
    files and a File's secondaryFiles keep their relative layout and no two outputs clash."""

    def __init__(self, outdir: Path, prefix: str) -> None:
        self.outdir = outdir.resolve()
        self.prefix = prefix.rstrip("/")
        self.moves: dict[Path, tuple[str, str]] = {}  # source → (LFN, output name)
        self.lfns: dict[str, Path] = {}

    def lfn(self, source: Path, output_name: str) -> str:
        resolved = source.resolve()
        if resolved in self.moves:
            return self.moves[resolved][0]
        try:
            relative = resolved.relative_to(self.outdir).as_posix()
        except ValueError:
            relative = resolved.name
        lfn = f"{self.prefix}/{relative}"
        if self.lfns.setdefault(lfn, resolved) != resolved:
            raise JobFailed(f"two outputs would both be {lfn}")
        self.moves[resolved] = (lfn, output_name)
        return lfn

    def rewrite(self, value: Any, output_name: str) -> Any:
        """`value` with each File's and Directory's location its LFN and no `path`."""
        if isinstance(value, list):
            return [self.rewrite(item, output_name) for item in value]
        if not isinstance(value, dict):
            return value
        rewritten = {key: self.rewrite(item, output_name) for key, item in value.items()}
        if value.get("class") in ("File", "Directory"):
            source = local_path(value)
            if source is not None:
                rewritten.pop("path", None)
                rewritten["location"] = f"lfn:{self.lfn(source, output_name)}"
        return rewritten


def _store(placement: _Placement, where: Callable[[str], Path], output_se: str) -> list[OutputFile]:
    """Move every placed File and Directory to `where` it goes (the output storage element's
    folder, or the spool of an upload to it); the manifest names each stored file once (a
    Directory's every file, listed or not)."""
    manifest: dict[str, OutputFile] = {}
    moved: list[Path] = []
    for source, (lfn, name) in sorted(placement.moves.items()):
        if any(source.is_relative_to(parent) for parent in moved):
            continue  # inside a Directory already moved with it
        if not source.exists():
            raise JobFailed(
                f"the runner reported {source.name}, which it did not leave",
                failure=Failure(FailureClass.STAGE_OUT, lfn=lfn, storage_element=output_se),
            )
        target = where(lfn)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            shutil.rmtree(target)  # a previous attempt's
        if source.is_relative_to(placement.outdir):
            shutil.move(source, target)
        elif source.is_dir():  # not the run's own (an input passed through): left in place
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
        moved.append(source)
        stored = (
            sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
        )
        for path in stored:
            file_lfn = f"{lfn}/{path.relative_to(target).as_posix()}" if path != target else lfn
            manifest.setdefault(
                file_lfn,
                OutputFile(
                    output_name=name,
                    lfn=file_lfn,
                    size=path.stat().st_size,
                    checksum=adler32(path),
                    storage_element=output_se,
                ),
            )
    return list(manifest.values())


def _status_report(value: Any) -> str:
    """The JSON content of the status report output's File (empty when there is none)."""
    if not (isinstance(value, dict) and value.get("class") == "File"):
        return ""
    path = local_path(value)
    text = path.read_text() if path is not None else str(value.get("contents") or "")
    try:
        json.loads(text)
    except ValueError as error:
        raise JobFailed(f"the status report is not JSON: {error}") from None
    return text


def collect_outputs(
    output_object: dict[str, Any],
    submission: Submission,
    settings: Storage,
    outdir: Path,
    spool: Path | None = None,
) -> Collected:
    """Move the outputs the runner left under `outdir` to the output storage element (into
    `spool` instead, for an upload to an XRootD SE: `stage_out`), and give back the output
    object at their LFNs: every value whatever its type, Files (with their secondaryFiles) and
    Directories wherever they are (in arrays, in records)."""
    output_se = settings.output_se
    assert output_se is not None
    report = _status_report(output_object.get(STATUS_REPORT_OUTPUT))
    placement = _Placement(outdir, submission.output_prefix)
    rewritten = {
        name: placement.rewrite(value, name)
        for name, value in sorted(output_object.items())
        if name != STATUS_REPORT_OUTPUT
    }
    if spool is None:
        manifest = _store(placement, lambda lfn: settings.se_path(output_se, lfn), output_se)
    else:
        manifest = _store(placement, lambda lfn: stage_out.spooled(spool, lfn), output_se)
    return Collected(manifest, report, json.dumps(rewritten, ensure_ascii=False))


async def input_object(
    payload: ComputePayload,
    submission: Submission,
    settings: Storage,
    catalogue: FileCatalogue | None,
    staging: Path | None = None,
) -> dict[str, Any]:
    """The parcel's CWL input object as the runner gets it: `lfn:` inputs staged (`staging`: a
    folder for those fetched), and the ids of the inputs it carries when the root process
    declares `dxts-input-ids`."""
    parameters = json.loads(submission.parameters_json) if submission.parameters_json else {}
    if not isinstance(parameters, dict):
        raise JobFailed("the parameters are not a CWL input object")
    parameters = await stage(parameters, settings, catalogue, staging)
    if _declares_input(payload, INPUT_IDS_INPUT):
        parameters[INPUT_IDS_INPUT] = list(submission.input_ids)
    return parameters


async def run_compute(
    job_dir: Path,
    payload: ComputePayload,
    submission: Submission,
    settings: RunnerSettings,
    catalogue: FileCatalogue | None,
    run: Run,
    started: Callable[[int], Awaitable[None]],
    boxed: sandbox.Boxed | None = None,
) -> Collected:
    """Run the parcel (in `boxed`'s sandbox, within its wall time, when given); what it gave
    on success, JobFailed otherwise."""
    root = materialise(payload, job_dir / "process")
    (job_dir / "resolved-hints.json").write_text(payload.resolved_hints_json or "{}")
    parameters = await input_object(payload, submission, settings, catalogue, job_dir / "staged")
    (job_dir / "job.json").write_text(json.dumps(parameters, indent=1))
    out, tmp = job_dir / "out", job_dir / "tmp"
    out.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    usage_file = job_dir / USAGE_FILE
    usage_file.unlink(missing_ok=True)  # a previous attempt's
    (job_dir / TOOL_STDERR).unlink(missing_ok=True)
    entered = sandbox.enter(boxed, job_dir, submission.parameters_json, parameters)
    runner = [
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
    command = entered.command(MEASURE, usage_file, runner)
    if run.cancelled:
        return Collected([])
    with (job_dir / RUNNER_STDOUT).open("wb") as stdout, (job_dir / RUNNER_LOG).open("wb") as log:
        run.process = await asyncio.create_subprocess_exec(
            *command, cwd=entered.cwd, stdin=asyncio.subprocess.DEVNULL, stdout=stdout,
            stderr=log, start_new_session=True,
            env={**entered.environment, TOOL_STDERR_VARIABLE: str(job_dir / TOOL_STDERR)},
        )  # fmt: skip
        if run.cancelled:  # cancelled while the process was being started
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.process.pid, signal.SIGKILL)
        await started(run.process.pid)
        code = await sandbox.wait_within(run.process, boxed.wall_time_s if boxed else None)
    run.usage = read_usage(usage_file)
    if run.cancelled:
        return Collected([])
    if code is None:
        raise sandbox.over_wall_time(boxed)
    if code != 0:
        raise runner_failed(job_dir, code, RUNNER_LOG, settings.error_pattern)
    try:
        output_object = json.loads((job_dir / RUNNER_STDOUT).read_text())
    except ValueError as error:
        raise JobFailed(f"the CWL runner's output object is not JSON: {error}") from None
    if boxed is not None and (problem := sandbox.outputs_problem(output_object, out, entered)):
        raise JobFailed(problem, failure=Failure(FailureClass.STAGE_OUT))
    endpoint = endpoints_of(settings).get(settings.output_se or "")
    spool = job_dir / "stage-out" if endpoint else None
    collected = collect_outputs(output_object, submission, settings, out, spool)
    if boxed is not None:  # the job user wrote them: now they are the adaptor's
        sandbox.reclaim(
            stage_out.spooled(spool, f.lfn) if spool else settings.se_path(f.storage_element, f.lfn)
            for f in collected.outputs
        )
    if endpoint and spool:
        timeout_s = getattr(settings, "transfer_timeout_s", 900.0)
        await stage_out.upload(collected.outputs, spool, endpoint, timeout_s)
    return collected


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
