"""The three real XRootD storage elements the storage tests run on (`scripts/xrootd`): started on
first use when CI has not started them already, and never faked."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dxts.core.storage import parse_endpoints

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "xrootd"
DATA_DIR = Path(os.environ.get("DXTS_XROOTD_DIR", "/tmp/dxts-xrootd"))


def xrootd_environment() -> dict[str, str]:
    """The servers' settings (`scripts/xrootd env`), the servers started now if they are down;
    the client's (not dxts's: other tests' adaptors read the environment) also set in
    os.environ, for the client library and the commands a test runs."""
    if subprocess.run([SCRIPT, "status"], capture_output=True).returncode != 0:
        started = subprocess.run([SCRIPT, "start"], capture_output=True, text=True)
        assert started.returncode == 0, f"scripts/xrootd start failed: {started.stderr}"
    lines = subprocess.run([SCRIPT, "env"], capture_output=True, text=True, check=True).stdout
    settings = {}
    for line in lines.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        settings[name] = shlex.split(value)[0]
    os.environ.update({k: v for k, v in settings.items() if not k.startswith("DXTS_")})
    return settings


def endpoints() -> dict[str, str]:
    """SE name -> root:// URL of its dxts folder."""
    text = xrootd_environment()["DXTS_STORAGE_ENDPOINTS"]
    return dict(pair.split("=", 1) for pair in text.split(","))


def http_server() -> str:
    """`http://host:port` of XRD-A's XrdHttp (WebDAV without TLS): XRD-A's files, over HTTP."""
    return xrootd_environment()["DXTS_XROOTD_HTTP"]


def data_path(se: str, url_path: str) -> Path:
    """Where the server keeps the file at `url_path` (e.g. `/dxts/x`) on disk."""
    return DATA_DIR / se / "data" / url_path.lstrip("/")


def place(path: Path, payload: bytes) -> None:
    """A file the server owns (as if it had written it), with any folder made for it."""
    hollow(path, 0)
    path.write_bytes(payload)


def hollow(path: Path, size: int) -> None:
    """A file of `size` zero bytes the server owns, taking no room on disk (sparse), with any
    folder made for it: a large file to copy, for nothing."""
    missing = [p for p in [path.parent, *path.parent.parents] if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        file.truncate(size)
    for made in [path, *missing]:
        shutil.chown(made, "xrootd", "xrootd")


def four_free_ports() -> int:
    """The first of four consecutive ports nothing listens on (the servers' three and HTTP)."""
    for first in range(10960, 11960, 4):
        sockets = []
        try:
            for port in range(first, first + 4):
                sockets.append(socket.create_server(("127.0.0.1", port)))
            return first
        except OSError:
            continue
        finally:
            for opened in sockets:
                opened.close()
    raise AssertionError("no four consecutive free ports from 10960")


# -- servers of a test's own, which it may stop, kill and restart ------------------------------


@dataclass(frozen=True)
class PrivateServers:
    """A set of XRootD servers of this module's own (`scripts/xrootd` with its own folder and
    ports), which it stops, kills and restarts: the shared ones stay up for everyone else, and
    no other process (another worker, another checkout's run, a server left over from one)
    uses the same folder or ports."""

    folder: Path
    first_port: int
    throttle: int | None = None  # bytes a second each server reads and writes, when limited

    @property
    def environment(self) -> dict[str, str]:
        throttled = {"DXTS_XROOTD_THROTTLE": str(self.throttle)} if self.throttle else {}
        return {
            **os.environ,
            "DXTS_XROOTD_DIR": str(self.folder),
            "DXTS_XROOTD_PORT": str(self.first_port),
            **throttled,
        }

    def script(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SCRIPT, command], env=self.environment, capture_output=True, text=True
        )

    def endpoints(self, name: str = "DOOMED") -> dict[str, object]:
        """NAME-A/B/C (DOOMED-A...): the servers' SEs, each its `/doomed` folder."""
        return dict(
            parse_endpoints(
                {
                    f"{name}-{letter}": f"root://127.0.0.1:{self.first_port + n}//doomed"
                    for n, letter in enumerate("ABC")
                }
            )
        )

    def data(self, letter: str, url_path: str) -> Path:
        return self.folder / f"XRD-{letter}" / "data" / url_path.lstrip("/")

    def pid(self, letter: str) -> int:
        """The server's PID, checked to be that server's: a PID file naming another process
        (PIDs are reused) would stop an innocent process and leave the server answering."""
        base = self.folder / f"XRD-{letter}"
        pid = int((base / "xrootd.pid").read_text())
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert str(base / "xrootd.cfg").encode() in command, f"PID {pid} is not XRD-{letter}"
        return pid


@contextlib.contextmanager
def private_servers(throttle: int | None = None) -> Iterator[PrivateServers]:
    """Servers of the caller's own (`PrivateServers`), started in a folder made for them and on
    free ports (each serving at most `throttle` bytes a second, when given); stopped and
    removed afterwards."""
    # Under /tmp itself: the daemons run as the user xrootd, who cannot enter pytest's folders.
    folder = Path(tempfile.mkdtemp(prefix="dxts-xrootd-"))
    servers = PrivateServers(folder, four_free_ports(), throttle)
    servers.folder.chmod(0o755)
    started = servers.script("start")
    try:
        logs = sorted(servers.folder.glob("XRD-*/log/xrootd.log"))
        told = "".join(log.read_text()[-600:] for log in logs)
        assert started.returncode == 0, f"{started.stderr}{told}"
        yield servers
    finally:
        servers.script("stop")
        shutil.rmtree(servers.folder, ignore_errors=True)
