"""`transfer`: files replicated between two XRootD servers through dxts, against `xrdcp`.

Needs the test servers (`scripts/xrootd start`). N files of S bytes are written to XRD-A, then,
rounds alternating, copied to XRD-C (which does no third-party copy, so both sides stream
through the client):

* baseline: one `xrdcp --parallel 16` of every file into a fresh folder at XRD-C;
* dxts: the local data adaptor's request (`ReplicateAndRegister` of every file to XRD-C, each
  copy's adler32 checked against the catalogue's, then registered), into a fresh SE folder, on
  a catalogue in the bench's database.

Figures (higher is better), each with the same run's xrdcp figure as baseline: `files_per_s`
and `mb_per_s`; at `--scale full` also `mb_per_s_large_files`, the issue's second target, for
10 files of 200 MB. Every file the run wrote at the servers is deleted at its end (a full run
writes some 20 GB).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dxts.backends.local.logic import data
from dxts.backends.local.settings import LocalSettings
from dxts.bench.harness import Bench, Figure, significant
from dxts.core import transfers
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.errors import FailedPrecondition
from dxts.core.lfn import FileNamespace
from dxts.core.storage import parse_endpoints
from dxts.core.transfers import CLIENT_ENVIRONMENT

SOURCE = "root://127.0.0.1:10940//bench"
TARGET = "root://127.0.0.1:10942//bench"


@dataclass(frozen=True)
class TransferParams:
    files: int
    size: int
    rounds: int
    large: bool = False  # its figure is the bytes/s alone, `mb_per_s_large_files`


SCALES = {
    "tiny": (TransferParams(10, 10_000, 1),),
    "small": (TransferParams(200, 100_000, 2),),
    "full": (TransferParams(1000, 1_000_000, 3), TransferParams(10, 200_000_000, 2, large=True)),
}


def xrdcp(urls: list[str], folder: str) -> float:
    """One xrdcp of every URL into a new folder at the target; its seconds."""
    environment = {**os.environ, **CLIENT_ENVIRONMENT}
    subprocess.run(["xrdfs", "127.0.0.1:10942", "mkdir", "-p", folder], check=True, env=environment)
    started = time.perf_counter()
    done = subprocess.run(
        ["xrdcp", "--nopbar", "--parallel", "16", *urls, f"root://127.0.0.1:10942/{folder}/"],
        capture_output=True,
        text=True,
        env=environment,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise FailedPrecondition(f"xrdcp failed: {done.stderr.strip().splitlines()[-1:]}")
    return seconds


async def run(bench: Bench, sets: tuple[TransferParams, ...]) -> None:
    url = bench.database.url.render_as_string(hide_password=False)
    catalogue = LocalFileCatalogue(CatalogueSettings(url=url))
    await catalogue.start()
    try:
        for params in sets:
            await _run_set(bench, params, catalogue)
    finally:
        await catalogue.close()


async def _run_set(bench: Bench, params: TransferParams, catalogue: LocalFileCatalogue) -> None:
    """One set of files, its rounds and its figures; its files at the servers deleted after."""
    stamp = time.time_ns()
    written: list[str] = []  # every file's URL at the servers, deleted at the end
    lfns = [f"/bench/transfer/{stamp}/f{n:05d}" for n in range(params.files)]
    with tempfile.TemporaryDirectory(prefix="dxts-bench-transfer-") as name:
        folder = Path(name)
        registered = []
        for lfn in lfns:
            payload = os.urandom(params.size)
            (folder / lfn.rsplit("/", 1)[1]).write_bytes(payload)
            checksum = f"adler32:{zlib.adler32(payload):08x}"
            registered.append(
                CatalogueFile(lfn=lfn, size=params.size, checksum=checksum, replicas=("SRC",))
            )
        upload = [str(folder / lfn.rsplit("/", 1)[1]) for lfn in lfns]
        await asyncio.to_thread(xrdcp_to_source, upload, f"/bench/bench/transfer/{stamp}")
        await catalogue.register(registered)
        urls = [f"{SOURCE}{lfn}" for lfn in lfns]
        written += urls
        baseline, through = [], []
        for round_number in range(params.rounds + 1):
            folder_c = f"/bench/xrdcp/{stamp}/{round_number}"
            written += [f"root://127.0.0.1:10942/{folder_c}/{u.rsplit('/', 1)[1]}" for u in urls]
            seconds = await asyncio.to_thread(xrdcp, urls, folder_c)
            target = f"{TARGET}/r{stamp}-{round_number}"
            written += [f"{target}{lfn}" for lfn in lfns]
            settings = LocalSettings(
                work_dir=folder / "work",
                storage_elements=["LOCAL"],
                storage_endpoints=parse_endpoints({"SRC": SOURCE, f"DST{round_number}": target}),
                sandbox="none",
            )
            request = {
                "Operations": [
                    {
                        "Type": "ReplicateAndRegister",
                        "TargetSE": [f"DST{round_number}"],
                        "Files": [{"LFN": lfn} for lfn in lfns],
                    }
                ]
            }
            started = time.perf_counter()
            report = await data.run_request(
                request, settings, catalogue, data.VOFiles("bench", FileNamespace())
            )
            dxts_seconds = time.perf_counter() - started
            if report.failures:
                raise FailedPrecondition(report.summary())
            if round_number:  # round 0 warms the connections and the checksum caches
                baseline.append(seconds)
                through.append(dxts_seconds)
    await asyncio.to_thread(delete, written)
    base, mine = statistics.median(baseline), statistics.median(through)
    megabytes = params.files * params.size / 1e6
    described = {
        "files": params.files,
        "file_bytes": params.size,
        "rounds": params.rounds,
        "baseline_command": "xrdcp --parallel 16 root://A//f... root://C//dir/",
        "dxts": "local data adaptor ReplicateAndRegister A -> C, adler32 checked, registered",
    }
    if params.large:
        figure(bench, "mb_per_s_large_files", megabytes / mine, megabytes / base, described)
        return
    figure(bench, "files_per_s", params.files / mine, params.files / base, described)
    figure(bench, "mb_per_s", megabytes / mine, megabytes / base, described)


def delete(urls: list[str]) -> None:
    """Delete the run's files at the servers, 16 at once (one already gone is no error)."""
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(transfers.remove, urls))


def xrdcp_to_source(paths: list[str], folder: str) -> None:
    environment = {**os.environ, **CLIENT_ENVIRONMENT}
    subprocess.run(["xrdfs", "127.0.0.1:10940", "mkdir", "-p", folder], check=True, env=environment)
    subprocess.run(
        ["xrdcp", "--nopbar", "--parallel", "16", *paths, f"root://127.0.0.1:10940/{folder}/"],
        check=True,
        capture_output=True,
        env=environment,
    )


def figure(
    bench: Bench, name: str, value: float, baseline: float, params: dict[str, object]
) -> None:
    measured = Figure(
        benchmark=bench.name,
        figure=name,
        value=significant(value),
        unit=name.split("_per_s")[0] + "/s",  # files/s, mb/s
        baseline=significant(baseline),
        params={"scale": bench.scale, **params},
    )
    bench.figures.append(measured)
    print(measured.as_json(), file=bench.out, flush=True)
