"""`dxts-cwl-runner`: the standard cwl-runner interface over a dxts installation.

    dxts-cwl-runner [--outdir DIR] [--quiet] PROCESS [JOB]

runs PROCESS (a CommandLineTool or a Workflow, plain CWL) on JOB as a dxts user job, exactly as
a CWL runner does: the local Files of the input object (relative locations are read beside JOB,
as cwltool does) are put to a storage element first and passed as `lfn:` inputs, so the job
runs the same whatever backend takes it; the runner waits for the job to end, fetches the
Files and Directories of the output object the backend reported into `--outdir` and prints the
object as JSON on stdout with cwltool's fields (location, path, basename, checksum, size,
format, secondaryFiles, listing; values of every other type as reported). The exit status
is the one CWL runners use: 0 done, 1 failed (or refused), 33 when the process needs a feature
the runner under the backend does not support.

The installation is the one the `dxts` commands use (`--data-dir`, DXTS_DATA_DIR, the running
`dxts up`, the DXTS_* addresses). Start-up is kept light: argparse, not the `dxts` command's
typer and rich.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

EXIT_FAILED = 1
EXIT_UNSUPPORTED = 33
POLL_S = 0.05
# How the local adaptor reports a runner's own exit status (dxts.backends.runner.cwl).
RUNNER_EXIT = re.compile(r"exited with (\d+)")
RETRIES = 10
T = TypeVar("T")


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="dxts-cwl-runner", description="Run a CWL process as a dxts user job."
    )
    parser.add_argument("process", metavar="PROCESS", type=Path)
    parser.add_argument("job", metavar="JOB", type=Path, nargs="?")
    parser.add_argument("--outdir", type=Path, default=Path("."), help="where outputs go")
    parser.add_argument("--quiet", action="store_true", help="only errors on stderr")
    parser.add_argument("--data-dir", type=Path, help="the data directory of `dxts up`")
    parser.add_argument("--se", help="the storage element inputs are put to (default: the first)")
    parser.add_argument("--version", action="version", version="dxts-cwl-runner 1")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = arguments(argv)
    from dxts.core.errors import DxtsError

    try:
        return asyncio.run(run(options))
    except DxtsError as error:
        from dxts.cli.client import fail_line, problem_line

        violations = getattr(error, "violations", None)
        if violations:
            for violation in violations:
                fail_line(problem_line(violation.field, violation.description))
        else:
            fail_line(f"error: {error}")
        return EXIT_FAILED
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as error:
        grpc = sys.modules.get("grpc")  # a failed call; grpc is imported only to make one
        if grpc is None or not isinstance(error, grpc.aio.AioRpcError):
            raise
        print(f"error: {error.code().name.lower()}: {error.details()}", file=sys.stderr)
        return EXIT_FAILED


def say(options: argparse.Namespace, text: str) -> None:
    if not options.quiet:
        print(text, file=sys.stderr)


async def run(options: argparse.Namespace) -> int:
    from dxts.cli.client import Clients, request_id
    from dxts.cli.connection import Options
    from dxts.cli.documents import loaded_bundle
    from dxts.cli.files import Storage
    from dxts.v1 import common_pb2, definition_pb2, execution_pb2

    # PROCESS may name one entry of a packed document: `packed.cwl#main`.
    process, _, fragment = str(options.process).partition("#")
    settings = Options({}, options.data_dir)
    connection = settings.connection()
    storage = Storage.of(connection)
    storage_element = options.se or (storage.elements[0] if storage.elements else "")
    job = read_job(options.job)
    base = options.job.resolve().parent if options.job else Path.cwd()
    sent, document = loaded_bundle(Path(process), fragment=fragment)
    patterns = secondary_patterns(
        [document.raw, *(node.body for node in document.processes() if node.body)]
    )
    async with storage.catalogue() as catalogue:
        uploaded: dict[tuple[Path, tuple[Path, ...]], str] = {}

        async def put(path: Path, siblings: tuple[Path, ...] = ()) -> str:
            if (path, siblings) not in uploaded:
                lfn = None
                if siblings:  # one directory, named by every file of it, holds them all
                    folder = upload_directory((path, *siblings), storage.uploads)
                    for sibling in siblings:
                        await storage.put(
                            catalogue, sibling, storage_element, sibling_lfn(folder, sibling)
                        )
                    lfn = sibling_lfn(folder, path)
                uploaded[path, siblings] = await storage.put(catalogue, path, storage_element, lfn)
            return uploaded[path, siblings]

        inputs = await stage_inputs(job, base, put, patterns)
    clients = Clients(connection, settings.where())
    try:
        submit = definition_pb2.SubmitJobRequest(
            request_id=request_id(),  # the same on a retry: the job is submitted once
            bundle=sent,
            inputs_json=json.dumps(inputs),
        )
        submitted = await patiently(lambda: clients.definition.SubmitJob(submit))
        say(options, f"dxts-cwl-runner: job {submitted.parcel_id}")
        terminal = {
            common_pb2.PARCEL_STATUS_DONE,
            common_pb2.PARCEL_STATUS_PARTIALLY_DONE,
            common_pb2.PARCEL_STATUS_FAILED,
            common_pb2.PARCEL_STATUS_CANCELLED,
        }
        request = execution_pb2.GetUserParcelRequest(parcel_id=submitted.parcel_id)
        while True:
            status = await patiently(lambda: clients.execution.GetUserParcel(request))
            if status.parcel.status in terminal:
                break
            await asyncio.sleep(POLL_S)
    finally:
        await clients.close()
    if status.parcel.status != common_pb2.PARCEL_STATUS_DONE:
        message = status.outcome.message or status.outcome.backend_status or "the job failed"
        print(f"error: job {submitted.parcel_id}: {message}", file=sys.stderr)
        code = RUNNER_EXIT.search(message)
        if code and int(code.group(1)) == EXIT_UNSUPPORTED:
            return EXIT_UNSUPPORTED
        return EXIT_FAILED
    outdir = options.outdir.resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    async with storage.catalogue() as catalogue:

        async def fetch(lfn: str, destination: Path) -> Path:
            return await storage.get(catalogue, lfn, destination)

        reported = status.outcome.output_object_json
        if reported:
            result = await localised(json.loads(reported), outdir, fetch)
        else:
            result = await output_object(
                declared_outputs(Path(process), fragment), status.outputs, outdir, fetch
            )
    print(json.dumps(result, indent=4))
    return 0


async def patiently(call: Callable[[], Awaitable[T]]) -> T:
    """`call()`, again while the service is unreachable or slower than the call's deadline (a
    loaded machine), up to RETRIES times; the calls retried are idempotent."""
    import grpc

    transient = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    for attempt in range(RETRIES):
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            if error.code() not in transient or attempt == RETRIES - 1:
                raise
            await asyncio.sleep(min(2**attempt * 0.1, 5.0))
    raise AssertionError("unreachable")


def read_job(path: Path | None) -> dict[str, Any]:
    """The input object (YAML or JSON); {} without one."""
    if path is None:
        return {}
    import yaml

    value = yaml.safe_load(path.read_text())
    if value is None:
        return {}
    if not isinstance(value, dict):
        from dxts.core.errors import InvalidArgument

        raise InvalidArgument(f"{path} is not a CWL input object (a mapping)", field="JOB")
    return value


def local_path(location: str, base: Path) -> Path | None:
    """The local file a location names (relative: under `base`), None for other schemes."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:  # lfn:, http:, ... (not a Windows drive)
        return None
    return base / unquote(location)


def secondary_patterns(documents: list[Any]) -> tuple[str, ...]:
    """Every `secondaryFiles` pattern written in the documents (`.bai`, `^.bai`; an optional
    one's `?` dropped), expressions left out: what a runner looks for beside a File."""
    found: dict[str, None] = {}

    def add(spec: Any) -> None:
        if isinstance(spec, list):
            for item in spec:
                add(item)
            return
        pattern = spec.get("pattern") if isinstance(spec, dict) else spec
        if isinstance(pattern, str) and "$(" not in pattern and "${" not in pattern:
            found[pattern.removesuffix("?")] = None

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "secondaryFiles":
                    add(item)
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    for document in documents:
        visit(document)
    return tuple(found)


def secondary_name(name: str, pattern: str) -> str:
    """The name a secondaryFiles pattern gives beside `name`, as CWL defines it: each leading
    `^` strips one extension, the rest is appended."""
    while pattern.startswith("^") and "." in name:
        name, pattern = name.rsplit(".", 1)[0], pattern[1:]
    return name + pattern.lstrip("^")


def upload_directory(paths: tuple[Path, ...], prefix: str) -> str:
    """The upload directory of a File and the secondary files beside it, named by all of them
    (their names and contents), so that no two different sets share one, under `prefix`."""
    from dxts.cli.files import upload_lfn

    digest = hashlib.sha256(json.dumps([upload_lfn(path, prefix) for path in paths]).encode())
    return f"{prefix}/{digest.hexdigest()[:32]}"


def sibling_lfn(folder: str, path: Path) -> str:
    return f"{folder}/{path.name}"


async def stage_inputs(
    value: Any, base: Path, put: Callable[..., Awaitable[str]], patterns: tuple[str, ...] = ()
) -> Any:
    """The input object as the job gets it: each local File put to storage and named by its
    LFN (`lfn:`), each local Directory by its absolute `file://` URI (directories are not
    stored; they are read where they are). A File's secondary files the process asks for by
    pattern (`patterns`) that are beside it are put beside it, in the same LFN directory,
    where the runner looks for them."""
    if isinstance(value, list):
        return [await stage_inputs(item, base, put, patterns) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: await stage_inputs(item, base, put, patterns) for key, item in value.items()}
    location = value.get("location") or value.get("path")
    if value.get("class") not in ("File", "Directory") or not isinstance(location, str):
        return out
    path = local_path(location, base)
    if path is None:
        return out
    out.pop("path", None)
    if value["class"] == "File":
        beside = {path.parent / secondary_name(path.name, p) for p in patterns} - {path}
        siblings = tuple(sorted(sibling for sibling in beside if sibling.is_file()))
        out["location"] = f"lfn:{await (put(path, siblings) if siblings else put(path))}"
    else:
        out["location"] = path.resolve().as_uri()
    return out


def declared_outputs(process: Path, fragment: str = "") -> dict[str, bool]:
    """The process's output ids, each with whether it is an array (read from the document as
    written; in a packed `$graph` document, the entry `fragment`, by default `#main`)."""
    import yaml

    try:
        document = yaml.safe_load(process.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    if isinstance(document, dict) and "$graph" in document:
        document = next(
            (
                item
                for item in document["$graph"]
                if isinstance(item, dict)
                and str(item.get("id", "")).lstrip("#") == (fragment or "main")
            ),
            {},
        )
    outputs = document.get("outputs") if isinstance(document, dict) else None
    if isinstance(outputs, dict):
        return {
            name: is_array(spec.get("type") if isinstance(spec, dict) else spec)
            for name, spec in outputs.items()
        }
    if isinstance(outputs, list):
        return {
            str(item["id"]).rsplit("#", 1)[-1].rsplit("/", 1)[-1]: is_array(item.get("type"))
            for item in outputs
            if isinstance(item, dict) and "id" in item
        }
    return {}


def is_array(kind: Any) -> bool:
    if isinstance(kind, str):
        return kind.rstrip("?").endswith("[]")
    if isinstance(kind, dict):
        return kind.get("type") == "array"
    if isinstance(kind, list):
        return any(is_array(k) for k in kind if k != "null")
    return False


Fetch = Callable[[str, Path], Awaitable[Path]]


async def localised(value: Any, directory: Path, fetch: Fetch) -> Any:
    """The output object the backend reported, with every File and Directory it stored
    (`location: lfn:<LFN>`) fetched under `directory` and located there, as cwltool prints
    them; every other field and value as reported (format, checksum, secondaryFiles, records,
    numbers of any size)."""
    if isinstance(value, list):
        return [await localised(item, directory, fetch) for item in value]
    if not isinstance(value, dict):
        return value
    location = value.get("location")
    kind = value.get("class")
    if kind in ("File", "Directory") and isinstance(location, str) and location.startswith("lfn:"):
        lfn = location.removeprefix("lfn:")
        place = free_path(directory, str(value.get("basename") or lfn.rsplit("/", 1)[-1]))
        localised_value = dict(value)
        if kind == "File":
            await fetch(lfn, place)
        else:
            place.mkdir(parents=True)
            localised_value["listing"] = [
                await localised(entry, place, fetch) for entry in value.get("listing", [])
            ]
        if "secondaryFiles" in value:
            secondary = await localised(value["secondaryFiles"], directory, fetch)
            localised_value["secondaryFiles"] = secondary
        localised_value.update(location=place.as_uri(), path=str(place))
        return localised_value
    return {name: await localised(item, directory, fetch) for name, item in value.items()}


async def output_object(
    declared: dict[str, bool], outputs: Any, directory: Path, fetch: Fetch
) -> dict[str, Any]:
    """The CWL output object rebuilt from the job's output files alone, for a backend that
    reports no output object: each file under the output id it belongs to, fetched under
    `directory`. Every output the process declares is present (null when nothing was reported
    for it); outputs that are not Files cannot be known and come back null.
    """
    found: dict[str, list[dict[str, Any]]] = {}
    for output in outputs:
        place = free_path(directory, output.lfn.rsplit("/", 1)[-1])
        found.setdefault(output.output_name, []).append(file_object(await fetch(output.lfn, place)))
    result: dict[str, Any] = {}
    for name in {**dict.fromkeys(declared), **dict.fromkeys(found)}:
        files = found.get(name, [])
        if declared.get(name, len(files) > 1):
            result[name] = files
        else:
            result[name] = files[0] if files else None
    return result


def file_object(path: Path) -> dict[str, Any]:
    """A File as cwltool prints it."""
    digest = hashlib.sha1()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    stem, dot, extension = path.name.rpartition(".")
    return {
        "class": "File",
        "location": path.as_uri(),
        "path": str(path),
        "basename": path.name,
        "nameroot": stem if dot and stem else path.name,
        "nameext": f".{extension}" if dot and stem else "",
        "checksum": f"sha1${digest.hexdigest()}",
        "size": path.stat().st_size,
    }


def free_path(directory: Path, name: str) -> Path:
    """`directory/name`, or `directory/<n>/name` when that is taken (two outputs of one name)."""
    candidate, n = directory / name, 0
    while candidate.exists():
        n += 1
        candidate = directory / str(n) / name
    return candidate


def entry() -> None:
    sys.exit(main())
