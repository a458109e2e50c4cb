"""The issue's "done when": `scripts/demo --storage xrootd` runs the example production with every
storage element an XRootD server, reaches Completed, and prints each merged dataset's root://
URLs (one per server) and adler32 checksum; every URL fetched with plain `xrdcp` gives a file of
that checksum, and the server's `xrdfs ... query checksum` agrees."""

from __future__ import annotations

import os
import re
import subprocess
import zlib
from pathlib import Path

from xrootd_servers import xrootd_environment

ROOT = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT_S = 1200
REPLICA = re.compile(r"^  (root://(127\.0\.0\.1:\d+)(//\S+))  (adler32:[0-9a-f]{8})$")


def adler32(path: Path) -> str:
    return f"adler32:{zlib.adler32(path.read_bytes()):08x}"


def test_the_demo_on_xrootd_storage_prints_urls_xrdcp_fetches_and_checksums_match(
    tmp_path: Path,
) -> None:
    servers = xrootd_environment()["DXTS_STORAGE_ENDPOINTS"]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DXTS_")}
    environment["DXTS_DEMO_DIR"] = str(tmp_path / "demo")
    demo = subprocess.run(
        [ROOT / "scripts" / "demo", "--storage", "xrootd"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert re.search(r"^\S+ Completed", demo.stdout, re.MULTILINE), demo.stdout[-3000:]
    merged = demo.stdout.split("Merged datasets", 1)[1]
    replicas = [m.groups() for line in merged.splitlines() if (m := REPLICA.match(line))]
    # Each merged dataset on both servers (A: LOCAL-DISK, B: LOCAL-ARCHIVE), same checksum.
    hosts = dict(pair.split("=root://", 1) for pair in servers.split(","))
    expected = sorted(hosts[se].split("/", 1)[0] for se in ("XRD-A", "XRD-B"))
    assert replicas and sorted({host for _, host, _, _ in replicas}) == expected
    by_lfn: dict[str, set[str]] = {}
    for url, host, path, checksum in replicas:
        fetched = tmp_path / "fetched" / host / path.lstrip("/")
        fetched.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["xrdcp", "--silent", "--force", url, str(fetched)], check=True, timeout=60)
        assert adler32(fetched) == checksum, url
        answer = subprocess.run(
            ["xrdfs", host, "query", "checksum", path],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split()
        assert answer[0] == "adler32" and int(answer[1], 16) == int(checksum[8:], 16), answer
        by_lfn.setdefault(path.split("/demo/", 1)[1].split("/", 1)[1], set()).add(checksum)
    assert all(len(checksums) == 1 for checksums in by_lfn.values())
    assert len(replicas) == 2 * len(by_lfn)
