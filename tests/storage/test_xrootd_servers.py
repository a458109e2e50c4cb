"""scripts/xrootd runs three distinct real servers with the properties the storage tests rely on:
adler32 checksums everywhere, third-party copy on XRD-A and XRD-B and not on XRD-C, HTTP on
XRD-A."""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

import httpx
import pytest
from XRootD import client
from XRootD.client.flags import MkDirFlags, OpenFlags, QueryCode
from xrootd_servers import SCRIPT, data_path, endpoints


@pytest.fixture(scope="module")
def urls() -> dict[str, str]:
    return endpoints()


def _server(url: str) -> str:
    return url.split("//")[0] + "//" + url.split("//")[1]


def test_each_se_is_its_own_server_with_adler32(urls: dict[str, str], tmp_path: Path) -> None:
    assert sorted(urls) == ["XRD-A", "XRD-B", "XRD-C"]
    assert len({_server(url) for url in urls.values()}) == 3
    payload = b"one small file\n" * 100
    source = tmp_path / "f"
    source.write_bytes(payload)
    for se, url in urls.items():
        target = f"{url}/servers-test/f"
        copy = client.CopyProcess()
        copy.add_job(str(source), target, force=True)
        copy.prepare()
        status, results = copy.run()
        assert status.ok and results[0]["status"].ok, (se, results)
        assert data_path(se, "/dxts/servers-test/f").read_bytes() == payload
        status, answer = client.FileSystem(_server(url)).query(
            QueryCode.CHECKSUM, "/dxts/servers-test/f"
        )
        assert status.ok, status.message
        kind, value = answer.decode().rstrip("\x00").split()
        assert (kind, int(value, 16)) == ("adler32", zlib.adler32(payload))


def test_third_party_copy_is_on_where_it_should_be(urls: dict[str, str]) -> None:
    for se, expected in (("XRD-A", "1"), ("XRD-B", "1"), ("XRD-C", "tpc")):
        status, answer = client.FileSystem(_server(urls[se])).query(QueryCode.CONFIG, "tpc")
        assert status.ok, status.message
        assert answer.decode().strip() == expected, se


def test_status_says_whether_they_answer() -> None:
    endpoints()
    assert subprocess.run([SCRIPT, "status"], capture_output=True).returncode == 0
    assert subprocess.run([SCRIPT, "nonsense"], capture_output=True).returncode == 2


def test_xrd_a_serves_its_files_over_http(urls: dict[str, str]) -> None:
    payload = b"over http\n"
    url = f"{urls['XRD-A']}/servers-test/http"
    client.FileSystem(_server(url)).mkdir("/dxts/servers-test", MkDirFlags.MAKEPATH)
    with client.File() as remote:
        status, _ = remote.open(url, OpenFlags.DELETE)
        assert status.ok, status.message
        assert remote.write(payload)[0].ok
    answer = httpx.get("http://127.0.0.1:10943/dxts/servers-test/http")
    assert (answer.status_code, answer.content) == (200, payload)
