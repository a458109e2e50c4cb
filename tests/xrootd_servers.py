"""The three real XRootD storage elements the storage tests run on (`scripts/xrootd`): started on
first use when CI has not started them already, and never faked."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from pathlib import Path

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
