"""`dxts login`, `whoami`, `logout` against the real DiracX 0.7.0 server (`scripts/diracx`) and
dxts's services trusting it (on SQLite and MariaDB): the credentials DiracX's own CLI keeps are
used and refreshed, the device flow is DiracX's up to where an identity provider is needed,
and the people signed in this way meet the VO and ownership boundaries through the command."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from cli_support import EXAMPLES
from diracx_fixture import DiracXServer, running_diracx
from typer.testing import CliRunner, Result

from dxts.cli.connection import Options
from dxts.cli.diracx_credentials import LOGIN_FILE, Credentials, Login, write_credentials
from dxts.cli.main import app
from dxts.cli.up import Stack, compose
from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.db import Database
from dxts.core.grpc import DevKeys
from dxts.core.grpc.diracx_issuer import DiracXIssuer, TrustedIssuers
from dxts.core.settings import DiracXAuthSettings

DXTS = [sys.executable, "-c", "import sys; from dxts.cli.main import app; sys.exit(app())"]

As = Callable[..., Awaitable[Result]]


@pytest.fixture(scope="module")
def diracx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiracXServer]:
    with running_diracx(tmp_path_factory.mktemp("diracx")) as running:
        yield running


@pytest.fixture(scope="module")
async def stack(
    database: Database, data_dir: Path, dev_keys: DevKeys, diracx: DiracXServer
) -> AsyncIterator[Stack]:
    """dxts's services trusting the DiracX server for the VOs dxts and othervo."""
    issuer = DiracXIssuer(DiracXAuthSettings(url=diracx.url, vos=["dxts", "othervo"]))
    catalogue = await open_catalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{data_dir / 'catalogue.sqlite'}")
    )
    running = await compose(
        database,
        data_dir=data_dir,
        verifier=TrustedIssuers(dev_keys.verifier(), issuer),
        catalogue=catalogue,
        sweeps=False,
    )
    try:
        yield running
    finally:
        await running.stop()
        await catalogue.close()


def home(root: Path, user: str) -> tuple[Path, Path]:
    """A user's own data directory and DiracX credentials file."""
    return root / user / "dxts", root / user / "diracx-credentials.json"


def run_as(stack: Stack, root: Path, user: str, *args: str) -> Result:
    data, credentials = home(root, user)
    options = ["--data-dir", str(data)]
    for name in ("definition", "execution", "accounting"):
        options += [f"--{name}", stack.address(name)]
    return CliRunner().invoke(
        app,
        [*options, *args],
        env={"DIRACX_CREDENTIALS_PATH": str(credentials), "DXTS_TOKEN": None, "DIRACX_URL": None},
    )


def signed_in_with_dirac(diracx: DiracXServer, root: Path, user: str) -> Path:
    """What `dirac login` leaves: the user's DiracX tokens in DiracX's credentials file."""
    if user in diracx.users:
        tokens = diracx.tokens(*diracx.users[user])
    else:
        name, group = diracx.other_vo["users"][user]
        tokens = diracx.tokens(name, group, diracx.other_vo["vo"])
    _, credentials = home(root, user)
    write_credentials(credentials, Credentials.from_token_response(tokens))
    return credentials


@pytest.fixture(scope="module")
def people(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("people")


@pytest.fixture(scope="module")
async def as_user(stack: Stack, diracx: DiracXServer, people: Path) -> As:
    """`await as_user("alice", "show", wg)`: the command run by a DiracX user who signed in
    with `dirac login`, then `dxts login`."""
    for user in ("manager", "alice", "bob"):
        signed_in_with_dirac(diracx, people, user)
        vo = diracx.vo if user in diracx.users else diracx.other_vo["vo"]
        logged = run_as(stack, people, user, "login", vo, "--diracx-url", diracx.url)
        assert logged.exit_code == 0, logged.output

    async def invoke(user: str, *args: str) -> Result:
        return await asyncio.to_thread(run_as, stack, people, user, *args)

    return invoke


async def test_login_uses_the_credentials_diraxs_cli_keeps(
    as_user: As, people: Path, diracx: DiracXServer
) -> None:
    data, _ = home(people, "manager")
    assert json.loads((data / LOGIN_FILE).read_text())["url"] == diracx.url
    shown = await as_user("manager", "whoami")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == [
        "user   manager (dxts:dxts-manager)",
        "VO     dxts",
        "group  production",
        "roles  operator, user",
    ]


async def test_an_expired_access_token_is_refreshed_through_diracx(
    as_user: As, people: Path
) -> None:
    _, path = home(people, "alice")
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "expires_on": int(time.time()) - 60}))
    shown = await as_user("alice", "whoami")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[0] == "user   alice (dxts:dxts-alice)"
    renewed = json.loads(path.read_text())
    assert renewed["access_token"] != stored["access_token"]
    assert renewed["expires_on"] > time.time()
    # DiracX does not rotate a legacy-exchange refresh token: the one kept is still the one.
    assert renewed["refresh_token"] == stored["refresh_token"]


def first_line_of_login(diracx: DiracXServer, directory: Path) -> str:
    """The first line `dxts login` prints with no credentials, then the command is stopped."""
    process = subprocess.Popen(
        [*DXTS, "--data-dir", str(directory / "dxts"), "login", "dxts", "--diracx-url", diracx.url],
        env={"DIRACX_CREDENTIALS_PATH": str(directory / "credentials.json"), "PATH": "/usr/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        return process.stdout.readline()
    finally:
        process.kill()
        process.wait()


def test_the_device_flow_is_diracxs_up_to_the_identity_provider(
    diracx: DiracXServer, tmp_path: Path
) -> None:
    """With no credentials, `dxts login` starts DiracX's device flow and shows where to sign
    in; the rest needs the VO's identity provider, which this machine does not have."""
    line = first_line_of_login(diracx, tmp_path)
    assert line.startswith(f"to sign in, open {diracx.url}/api/auth/device?user_code="), line
    user_code = line.split("user_code=")[1].split()[0]
    assert line.rstrip().endswith(f"and enter {user_code})")
    assert not (tmp_path / "credentials.json").exists()


async def test_a_group_diracx_does_not_know_is_diracxs_refusal(
    diracx: DiracXServer, stack: Stack, tmp_path: Path
) -> None:
    refused = run_as(
        stack, tmp_path, "nobody", "login", "dxts", "--group", "nope", "--diracx-url", diracx.url
    )
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: DiracX refused the sign-in (400)")
    assert len(refused.stderr.splitlines()) == 1


async def test_the_logs_name_the_diracx_user(as_user: As) -> None:
    document = EXAMPLES / "mc-demo.cwl"
    submitted = await as_user("alice", "submit", str(document))
    assert submitted.exit_code == 0, submitted.output
    workgraph = submitted.stdout.strip()
    logs = await as_user("alice", "logs", workgraph, "-o", "json")
    assert logs.exit_code == 0, logs.output
    assert {entry["author"] for entry in json.loads(logs.stdout)} == {"alice"}


async def test_a_normal_user_cannot_steer_another_users_workgraph(as_user: As) -> None:
    document = EXAMPLES / "mc-demo.cwl"
    submitted = await as_user("manager", "submit", str(document))
    assert submitted.exit_code == 0, submitted.output
    workgraph = submitted.stdout.strip()
    refused = await as_user("alice", "start", workgraph)
    assert refused.exit_code == 1
    assert refused.stderr.endswith(
        "belongs to dxts:dxts-manager: steering it needs the 'operator' role\n"
    )
    assert len(refused.stderr.splitlines()) == 1
    started = await as_user("manager", "start", workgraph)
    assert started.exit_code == 0, started.output


async def test_another_vos_user_sees_nothing_of_this_vo(as_user: As) -> None:
    document = EXAMPLES / "mc-demo.cwl"
    submitted = await as_user("alice", "submit", str(document))
    assert submitted.exit_code == 0, submitted.output
    workgraph = submitted.stdout.strip()
    shown = await as_user("bob", "show", workgraph)
    assert shown.exit_code == 1
    assert "not found" in shown.stderr
    listed = await as_user("bob", "list", "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert workgraph not in listed.stdout
    halted = await as_user("bob", "halt", workgraph)
    assert halted.exit_code == 1


async def test_logout_revokes_and_forgets_the_sign_in(
    as_user: As, people: Path, diracx: DiracXServer
) -> None:
    data, path = home(people, "bob")
    refresh_token = json.loads(path.read_text())["refresh_token"]
    out = await as_user("bob", "logout")
    assert (out.exit_code, out.stdout.strip()) == (0, "signed out of DiracX"), out.output
    assert not path.exists() and not (data / LOGIN_FILE).exists()
    jti = uuid.UUID(Credentials(refresh_token, None, 0).claims()["jti"]).hex
    with contextlib.closing(sqlite3.connect(diracx.directory / "db" / "authdb.db")) as db:
        (status,) = db.execute("SELECT Status FROM RefreshTokens WHERE JTI = ?", (jti,)).fetchone()
    assert status == "REVOKED"
    again = await as_user("bob", "logout")
    assert (again.exit_code, again.stdout.strip()) == (0, "not signed in")


async def test_a_refused_sign_in_is_one_line_naming_the_login(
    stack: Stack, diracx: DiracXServer, tmp_path: Path
) -> None:
    """A pilot's DiracX identity (GenericPilot) gives no dxts role: the server's refusal, and
    where the token came from."""
    signed_in_with_dirac(diracx, tmp_path, "pilot")
    logged = await asyncio.to_thread(
        run_as, stack, tmp_path, "pilot", "login", "dxts", "--diracx-url", diracx.url
    )
    assert logged.exit_code == 0, logged.output
    refused = await asyncio.to_thread(run_as, stack, tmp_path, "pilot", "whoami")
    assert refused.exit_code == 1
    assert refused.stderr == (
        "error: the DiracX group 'pilot' (properties GenericPilot, LimitedDelegation) gives no "
        "dxts role (signed in with `dxts login`: is that sign-in current? run it again)\n"
    )


async def test_a_refresh_diracx_refuses_is_one_line(
    stack: Stack, diracx: DiracXServer, tmp_path: Path
) -> None:
    path = signed_in_with_dirac(diracx, tmp_path, "alice")
    logged = await asyncio.to_thread(
        run_as, stack, tmp_path, "alice", "login", "dxts", "--diracx-url", diracx.url
    )
    assert logged.exit_code == 0, logged.output
    stored = json.loads(path.read_text())
    path.write_text(
        json.dumps({**stored, "expires_on": int(time.time()) - 60, "refresh_token": "forged"})
    )
    refused = await asyncio.to_thread(run_as, stack, tmp_path, "alice", "whoami")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: DiracX refused to refresh the sign-in (")
    assert len(refused.stderr.splitlines()) == 1


def test_the_commands_ask_the_sign_in_for_a_token_on_every_call(
    diracx: DiracXServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The access token is read (and refreshed) per call, not once per command: a command that
    outlives it (`dxts watch`) goes on with the refreshed one."""
    path = signed_in_with_dirac(diracx, tmp_path, "alice")
    data, _ = home(tmp_path, "alice")
    Login(diracx.url, path).write(data)
    monkeypatch.setenv("DIRACX_CREDENTIALS_PATH", str(path))
    monkeypatch.delenv("DXTS_TOKEN", raising=False)
    connection = Options({}, data).connection()
    assert connection.token_source is not None
    assert connection.token_source() == connection.token
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "expires_on": int(time.time()) - 60}))
    refreshed = connection.token_source()
    assert refreshed != connection.token
    assert refreshed == json.loads(path.read_text())["access_token"]
