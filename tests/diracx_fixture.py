"""A real DiracX server for the tests (`scripts/diracx run`: DiracX 0.7.0 from PyPI in its own
virtualenv, sqlite databases, the sandbox store on a local moto S3 server), and a test pilot that
plays DIRAC's matcher, pilot and job wrapper through DiracX's API.

DiracX 0.7.0 has no matching endpoint (DIRAC's Matcher still reads the JobDB itself) and no call
that returns a job's JDL, so the pilot reads the JDL from the server's JobDB, as the Matcher
does; everything else goes through the REST API: the status walk Checking → Waiting → Matched →
Running → Completing → Done | Failed with a pilot's token, heartbeats (which return DiracX's Kill
commands), and the sandboxes with the job owner's token (the job wrapper runs with the owner's
credential, as a DIRAC job wrapper runs with the owner's proxy).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from dxts.backends.diracx.edge.client import DiracXClient
from dxts.backends.diracx.logic import sandbox
from dxts.backends.diracx.settings import PAYLOAD_MODULE, DiracXSettings

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "diracx"
VENV_PYTHON = ROOT / ".venv-diracx" / "bin" / "python"
START_TIMEOUT_S = 600  # the first run installs the pinned packages
PAYLOAD_COMMAND = [sys.executable, "-m", PAYLOAD_MODULE]


@dataclass
class DiracXServer:
    directory: Path
    url: str
    vo: str
    api_key: str
    users: dict[str, list[str]]
    # Another VO of the same installation and its users (the VO boundary tests).
    other_vo: dict[str, Any] = field(default_factory=dict)

    def tokens(self, username: str, group: str, vo: str | None = None) -> dict[str, Any]:
        """An access and a refresh token DiracX issues to `username` as `group` (its legacy
        exchange: what `dirac login` would give after the identity provider's sign-in)."""
        reply = httpx.get(
            f"{self.url}/api/auth/legacy-exchange",
            params={"preferred_username": username, "scope": f"vo:{vo or self.vo} group:{group}"},
            headers={"Authorization": f"Bearer diracx:legacy:{self.api_key}"},
            timeout=60,
        )
        reply.raise_for_status()
        return dict(reply.json())

    def access_token(self, role: str) -> str:
        """The access token of one of `users` (by its role name) or of the other VO's."""
        if role in self.users:
            return str(self.tokens(*self.users[role])["access_token"])
        username, group = self.other_vo["users"][role]
        return str(self.tokens(username, group, self.other_vo["vo"])["access_token"])

    def mint(self, claims: dict[str, Any], *, key: Any = None, kid: str | None = None) -> str:
        """A token signed offline with the installation's own signing key (as DiracX's tests
        mint theirs), or with `key` under DiracX's key id: claims a test chooses."""
        keys = KeySet.import_key_set(json.loads((self.directory / "jwks.json").read_text()))
        signing = next(k for k in keys.keys if "sign" in (k.get("key_ops") or []))
        header = {"alg": "Ed25519", "kid": kid or signing.kid}
        return jwt.encode(header, claims, key or signing, algorithms=["Ed25519"])

    def rotate_keys(self) -> None:
        """DiracX's own key rotation (the old key stays, for verifying only); the server
        signs with the new key once restarted."""
        subprocess.run(
            [
                str(VENV_PYTHON),
                "-m",
                "diracx.logic",
                "rotate-jwk",
                "--jwks-path",
                str(self.directory / "jwks.json"),
            ],
            check=True,
            capture_output=True,
        )

    def client(self, role: str = "adaptor", **options: Any) -> DiracXClient:
        username, group = self.users[role]
        return self.client_as(username, group, **options)

    def client_as(self, username: str, group: str, **options: Any) -> DiracXClient:
        return DiracXClient(
            self.url, api_key=self.api_key, vo=self.vo, group=group, username=username, **options
        )

    def adaptor_settings(self, work_dir: Path, **overrides: Any) -> DiracXSettings:
        username, group = self.users["adaptor"]
        values: dict[str, Any] = {
            "url": self.url,
            "vo": self.vo,
            "group": group,
            "username": username,
            "api_key": self.api_key,
            "work_dir": work_dir,
            "payload_command": PAYLOAD_COMMAND,
        }
        return DiracXSettings(**{**values, **overrides})

    def jdl(self, job_id: int) -> dict[str, Any]:
        """The job's JDL as DiracX stored it (what DIRAC's Matcher hands a pilot)."""
        with contextlib.closing(sqlite3.connect(self.directory / "db" / "jobdb.db")) as db:
            (stored,) = db.execute("SELECT JDL FROM JobJDLs WHERE JobID = ?", (job_id,)).fetchone()
        return parse_jdl(zlib.decompress(base64.b64decode(stored.rstrip("|"))).decode())


@contextlib.contextmanager
def running_diracx(directory: Path, port: int | None = None) -> Iterator[DiracXServer]:
    """`scripts/diracx run` in `directory` until the block ends (its process group is ended);
    on `port` (the same URL again after a restart) or a free one."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "diracx.json").unlink(missing_ok=True)
    log = (directory / "run.log").open("ab")
    process = subprocess.Popen(
        [str(SCRIPT), "run", str(directory), *([str(port)] if port else [])],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        description = directory / "diracx.json"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not description.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"DiracX did not start: {(directory / 'run.log').read_text()[-3000:]}")
            time.sleep(0.2)
        found = json.loads(description.read_text())
        yield DiracXServer(
            directory,
            found["url"],
            found["vo"],
            found["api_key"],
            found["users"],
            found.get("other_vo", {}),
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


# -- the JDL, as far as a pilot reads it ---------------------------------------------------------

_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[\[\]{};=,]|[^\s\[\]{};=,"]+)')


def parse_jdl(text: str) -> dict[str, Any]:
    """A ClassAd as nested dicts, lists, strings and numbers (enough for DiracX's JDLs)."""
    tokens = [m.group(1) for m in _TOKEN.finditer(text)]
    position = 0

    def value() -> Any:
        nonlocal position
        token = tokens[position]
        position += 1
        if token == "[":
            return record()
        if token == "{":
            items = []
            while tokens[position] != "}":
                items.append(value())
                if tokens[position] == ",":
                    position += 1
            position += 1
            return items
        if token.startswith('"'):
            return json.loads(token)
        with contextlib.suppress(ValueError):
            return int(token)
        return token

    def record() -> dict[str, Any]:
        nonlocal position
        attributes = {}
        while tokens[position] != "]":
            name = tokens[position]
            assert tokens[position + 1] == "=", text
            position += 2
            attributes[name] = value()
            if tokens[position] == ";":
                position += 1
        position += 1
        return attributes

    position = 1 if tokens[0] == "[" else 0
    return record() if tokens[0] == "[" else {}


def _strings(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


# -- the test pilot ------------------------------------------------------------------------------


@dataclass
class PilotRun:
    job_id: int
    exit_code: int | None
    commands: list[str] = field(default_factory=list)


class TestPilot:
    """Runs DiracX jobs here the way a pilot and its job wrapper would."""

    __test__ = False  # not a test class

    def __init__(self, server: DiracXServer, work_root: Path, site_environment: dict[str, str]):
        self.server = server
        self.work_root = work_root
        self.site_environment = site_environment
        self.pilot = server.client("pilot")
        self.admin = server.client("admin")
        self._owners: dict[tuple[str, str], DiracXClient] = {}

    async def close(self) -> None:
        for client in [self.pilot, self.admin, *self._owners.values()]:
            await client.close()

    def _owner(self, jdl: dict[str, Any]) -> DiracXClient:
        key = (jdl["Owner"], jdl["OwnerGroup"])
        if key not in self._owners:
            self._owners[key] = self.server.client_as(*key)
        return self._owners[key]

    async def waiting(self) -> list[int]:
        rows = await self.admin.search(
            [{"parameter": "Status", "operator": "eq", "value": "Received"}], ["JobID"]
        )
        return sorted(int(row["JobID"]) for row in rows)

    async def match(self, job_id: int) -> None:
        """Received → Checking → Waiting → Matched → Running, as the optimisers and a pilot
        would."""
        for status in ("Checking", "Waiting", "Matched", "Running"):
            await self.pilot.set_status([job_id], status, f"test pilot: {status}", source="Pilot")

    async def report_running_ahead(self, job_id: int, seconds: float) -> None:
        """A Running update stamped `seconds` in the future, as a pilot whose clock runs ahead
        (or whose update was stamped after a concurrent one) sends it: until then DiracX ignores
        any older-stamped status, a Kill included."""
        stamp = (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()
        update = {"Status": "Running", "MinorStatus": "Application", "Source": "JobWrapper"}
        await self.pilot._call("PATCH", "/api/jobs/status", json={str(job_id): {stamp: update}})

    async def status(self, job_id: int) -> str:
        (row,) = await self.admin.search(
            [{"parameter": "JobID", "operator": "eq", "value": job_id}], ["Status"]
        )
        return str(row["Status"])

    async def run(self, job_id: int, *, finish: bool = True) -> PilotRun:
        """Match, run the payload (killing it on a Kill command), upload the output sandbox and
        end the job Done or Failed by the payload's exit status."""
        await self.match(job_id)
        jdl = self.server.jdl(job_id)
        owner = self._owner(jdl)
        directory = self.work_root / str(job_id)
        directory.mkdir(parents=True, exist_ok=True)
        for pfn in _strings(jdl.get("InputSandbox")):
            for name, content in sandbox.unpack(await owner.download_sandbox(pfn)).items():
                (directory / name).write_bytes(content)
        environment = {**os.environ, **self.site_environment}
        for entry in _strings(jdl.get("ExecutionEnvironment")):
            name, _, value = entry.partition("=")
            environment[name] = value
        arguments = str(jdl.get("Arguments") or "").split()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        with (directory / "std.out").open("wb") as out, (directory / "std.err").open("wb") as err:
            process = await asyncio.create_subprocess_exec(
                str(jdl["Executable"]),
                *arguments,
                cwd=directory,
                env=environment,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            run = PilotRun(job_id, None)
            while run.exit_code is None:
                try:
                    run.exit_code = await asyncio.wait_for(process.wait(), timeout=0.5)
                except TimeoutError:
                    # No data: DiracX 0.7.0 keys heartbeat data by the second (two: 500).
                    commands = await self.pilot.heartbeat({job_id: {}})
                    run.commands.extend(c["command"] for c in commands)
                    if "Kill" in run.commands:
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(process.pid, signal.SIGKILL)
                        await process.wait()
                        return run
        if not finish:
            return run
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        files = {
            name: (directory / name).read_bytes()
            for name in _strings(jdl.get("OutputSandbox"))
            if (directory / name).is_file()
        }
        if files:
            pfn = await owner.upload_sandbox(sandbox.pack(files))
            await owner.assign_output_sandbox(job_id, pfn)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        await self.pilot.set_parameters(
            {job_id: {"TotalCPUTime(s)": int(cpu), "WallClockTime(s)": time.monotonic() - started}}
        )
        await self.pilot.set_status(
            [job_id], "Completing", "Uploading Output Sandbox", source="JobWrapper"
        )
        if run.exit_code == 0:
            await self.pilot.set_status([job_id], "Done", "Execution Complete", source="JobWrapper")
        else:
            await self.pilot.set_status(
                [job_id],
                "Failed",
                "Application Finished With Errors",
                application_status=f"exit code {run.exit_code}",
                source="JobWrapper",
            )
        return run

    async def run_waiting(self) -> list[PilotRun]:
        return [await self.run(job_id) for job_id in await self.waiting()]


@contextlib.asynccontextmanager
async def pilot_running_every_job(server: DiracXServer, work: Path) -> AsyncIterator[TestPilot]:
    """A pilot that picks up every job DiracX receives, until the block ends — each in its own
    task, so a long job being cancelled does not hold the others back, and a Kill reaches the
    running payload through the pilot's heartbeat as it would on a worker node."""
    pilot = TestPilot(server, work, {})
    runs: dict[int, asyncio.Task[object]] = {}

    async def pick_up() -> None:
        while True:
            for job_id in await pilot.waiting():
                if job_id not in runs:
                    runs[job_id] = asyncio.create_task(pilot.run(job_id))
            await asyncio.sleep(0.3)

    picker = asyncio.create_task(pick_up())
    try:
        yield pilot
    finally:
        picker.cancel()
        for task in [picker, *runs.values()]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await pilot.close()
