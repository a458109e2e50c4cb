"""A `davs://` SE over TLS, against real servers of this module's own (`scripts/xrootd` with
`DXTS_XROOTD_TLS=1`: XRD-A's XrdHttp speaking https with a host certificate from a CA made for
it), on both catalogue databases: replication to it from an XRootD server and from it to a local
directory, each copy's adler32 asked of the server over https (`Want-Digest`) before it is
registered; and the server's certificate verified against the CA folder `X509_CERT_DIR` names,
so that without it the copy fails as stage-out, naming the SE, and nothing is registered."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from xrootd_servers import SCRIPT, four_free_ports

from dxts.backends.local.logic import data
from dxts.backends.local.settings import LocalSettings
from dxts.core import transfers
from dxts.core.adaptor.model import FailureClass
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.lfn import FileNamespace

LHCB = data.VOFiles("lhcb", FileNamespace())
DAVS = "SITE-DAVS"


@dataclass(frozen=True)
class TlsServers:
    folder: Path
    first_port: int

    @property
    def ca_folder(self) -> str:
        return str(self.folder / "tls" / "ca")

    def endpoints(self) -> dict[str, str]:
        """SITE-DAVS (XRD-A over davs://) and SITE-ROOT (XRD-B over root://)."""
        return {
            DAVS: f"davs://127.0.0.1:{self.first_port + 3}/dxts",
            "SITE-ROOT": f"root://127.0.0.1:{self.first_port + 1}//dxts",
        }

    def on_disk(self, lfn: str) -> Path:
        return self.folder / "XRD-A" / "data" / "dxts" / lfn.lstrip("/")


@pytest.fixture(scope="module")
def servers() -> Iterator[TlsServers]:
    # Under /tmp itself: the daemons run as the user xrootd, who cannot enter pytest's folders.
    folder = Path(tempfile.mkdtemp(prefix="dxts-xrootd-tls-"))
    folder.chmod(0o755)
    running = TlsServers(folder, four_free_ports())
    environment = {
        **os.environ,
        "DXTS_XROOTD_DIR": str(folder),
        "DXTS_XROOTD_PORT": str(running.first_port),
        "DXTS_XROOTD_TLS": "1",
    }
    started = subprocess.run([SCRIPT, "start"], env=environment, capture_output=True, text=True)
    try:
        assert started.returncode == 0, started.stderr
        yield running
    finally:
        subprocess.run([SCRIPT, "stop"], env=environment, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
async def catalogue(db_url: str) -> AsyncIterator[LocalFileCatalogue]:
    catalogue = LocalFileCatalogue(CatalogueSettings(url=db_url))
    await catalogue.start()
    try:
        yield catalogue
    finally:
        await catalogue.close()


@pytest.fixture
def settings(tmp_path: Path, servers: TlsServers) -> LocalSettings:
    return LocalSettings(
        work_dir=tmp_path / "work",
        storage_elements=["LOCAL"],
        storage_endpoints=servers.endpoints(),
        transfer_timeout_s=60,
    )


def adler32(payload: bytes) -> str:
    return f"adler32:{zlib.adler32(payload):08x}"


def replicate(lfns: list[str], target: str, source: str) -> dict[str, object]:
    files = [{"LFN": lfn, "Inputs": [f"input-{lfn}"]} for lfn in lfns]
    operation = {"Type": "ReplicateAndRegister", "SourceSE": source, "TargetSE": target}
    return {"Operations": [{**operation, "Files": files}]}


async def registered_at_root(
    settings: LocalSettings, catalogue: LocalFileCatalogue, payloads: dict[str, bytes], folder: Path
) -> None:
    """Each file uploaded to SITE-ROOT through the XRootD client, and registered there."""
    copies = []
    for number, (lfn, payload) in enumerate(payloads.items()):
        (folder / f"{number}").write_bytes(payload)
        url = settings.storage_endpoints["SITE-ROOT"].url(lfn)
        copies.append(transfers.Copy(str(folder / f"{number}"), url))
    assert all(r.ok for r in await transfers.copy_files(copies, timeout_s=60))
    await catalogue.register(
        [
            CatalogueFile(lfn=lfn, size=len(p), checksum=adler32(p), replicas=("SITE-ROOT",))
            for lfn, p in payloads.items()
        ]
    )


async def test_replication_over_davs_is_verified_and_registered(
    settings: LocalSettings,
    catalogue: LocalFileCatalogue,
    servers: TlsServers,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("X509_CERT_DIR", servers.ca_folder)
    run = f"/lhcb/davs/{db_url.split(':')[0].split('+')[0]}/{time.monotonic_ns()}"
    payloads = {f"{run}/f{n}": os.urandom(200_000 + n) for n in range(3)}
    await registered_at_root(settings, catalogue, payloads, tmp_path)
    endpoint = settings.storage_endpoints[DAVS]
    assert endpoint.url("/x").startswith("https://127.0.0.1:")

    report = await data.run_request(
        replicate(list(payloads), DAVS, "SITE-ROOT"), settings, catalogue, LHCB
    )
    assert report.failures == {}
    for lfn, payload in payloads.items():
        assert servers.on_disk(lfn).read_bytes() == payload
        answer = transfers.checksum(endpoint.url(lfn))  # over https, Want-Digest
        assert transfers.same_checksum(answer or "", adler32(payload))
    report = await data.run_request(
        replicate(list(payloads), "LOCAL", DAVS), settings, catalogue, LHCB
    )
    assert report.failures == {}
    for lfn, payload in payloads.items():
        assert settings.se_path("LOCAL", lfn).read_bytes() == payload
    held = await catalogue.replicas(list(payloads))
    assert {lfn: set(ses) for lfn, ses in held.items()} == {
        lfn: {"SITE-ROOT", DAVS, "LOCAL"} for lfn in payloads
    }


async def test_a_server_certificate_no_ca_vouches_for_fails_the_copy(
    settings: LocalSettings,
    catalogue: LocalFileCatalogue,
    servers: TlsServers,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("X509_CERT_DIR", raising=False)  # the system's CAs know not this one
    lfn = f"/lhcb/davs/{db_url.split(':')[0].split('+')[0]}/{time.monotonic_ns()}/unverified"
    await registered_at_root(settings, catalogue, {lfn: b"not over an unverified link\n"}, tmp_path)
    report = await data.run_request(replicate([lfn], DAVS, "SITE-ROOT"), settings, catalogue, LHCB)
    failure = report.failures[lfn].failure
    assert (failure.failure_class, failure.storage_element) == (FailureClass.STAGE_OUT, DAVS)
    assert "CERTIFICATE_VERIFY_FAILED" in failure.tool_message, failure.tool_message
    assert not servers.on_disk(lfn).exists()
    assert await catalogue.replicas([lfn]) == {lfn: ("SITE-ROOT",)}
