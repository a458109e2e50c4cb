"""`dxts login`, `dxts logout`, `dxts whoami`: sign in with the identity people already have in
their DiracX installation.

`dxts login VO` uses the tokens DiracX's own CLI keeps (`dxts.cli.diracx_credentials`) when they
are of that DiracX, VO (and group, if asked for), refreshing them if they have expired; otherwise
it runs DiracX's device flow, as `dirac login` does: it prints the address where the user signs
in through the VO's identity provider, waits for DiracX to issue the tokens, and stores them
where `dirac` would. From then on every command (and `dxts-cwl-runner`) calls dxts with that
DiracX access token, unless --token or DXTS_TOKEN names another. The dxts installation must
trust that DiracX (DXTS_AUTH_DIRACX_URL, docs/deploy.md).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated

import httpx
import typer

from dxts.cli.client import EXIT_FAILED, Clients, fail_line, options_of, run
from dxts.cli.connection import running_data_dir
from dxts.cli.diracx_credentials import (
    CLIENT_ID,
    DEVICE_GRANT,
    HTTP_TIMEOUT_S,
    LOGIN_FILE,
    URL_VARIABLE,
    Credentials,
    Login,
    credentials_path,
    read_credentials,
    refresh,
    revoke,
    token_endpoint_call,
    write_credentials,
)
from dxts.core.errors import DxtsError, Unauthenticated
from dxts.v1 import definition_pb2

POLL_S = 2.0  # what DiracX's CLI waits between polls (longer hits its server's keep-alive)


def _data_dir(ctx: typer.Context) -> Path:
    return running_data_dir(options_of(ctx).data_dir)


def _fail(message: str) -> typer.Exit:
    fail_line(f"error: {message}")
    return typer.Exit(EXIT_FAILED)


def _say(text: str) -> None:
    typer.echo(text)
    sys.stdout.flush()


def login(
    ctx: typer.Context,
    vo: Annotated[
        str | None,
        typer.Argument(help="The VO to sign in to (default: the one of your DiracX credentials)."),
    ] = None,
    group: Annotated[
        str | None, typer.Option(help="The DiracX group (default: the VO's default group).")
    ] = None,
    prop: Annotated[
        list[str] | None,
        typer.Option("--property", help="A DiracX property to ask for beyond the group's."),
    ] = None,
    diracx_url: Annotated[
        str | None,
        typer.Option(help=f"The DiracX installation (default: {URL_VARIABLE}, else the last)."),
    ] = None,
) -> None:
    """Sign in with your DiracX identity: its credentials if you have them, else its device
    flow."""
    directory = _data_dir(ctx)
    previous = Login.read(directory)
    url = (diracx_url or os.environ.get(URL_VARIABLE) or (previous.url if previous else "")).rstrip(
        "/"
    )
    if not url:
        raise _fail(f"which DiracX? give --diracx-url or set {URL_VARIABLE}")
    path = credentials_path()
    try:
        credentials = _reusable(url, path, vo, group, prop)
        if credentials is not None:
            _say(f"using your DiracX credentials in {path}")
        else:
            if not vo:
                raise _fail("name the VO to sign in to: dxts login VO")
            credentials = _device_flow(url, _scope(vo, group, prop))
            write_credentials(path, credentials)
            _say(f"saved your DiracX credentials to {path}")
    except DxtsError as error:
        raise _fail(str(error)) from None
    Login(url, path).write(directory)
    claims = credentials.claims()
    _say(
        f"signed in to DiracX {url} as {claims.get('preferred_username', '?')} "
        f"(VO {claims.get('vo', '?')}, group {claims.get('dirac_group', '?')})"
    )


def _scope(vo: str, group: str | None, properties: list[str] | None) -> str:
    return " ".join(
        [
            f"vo:{vo}",
            *([f"group:{group}"] if group else []),
            *(f"property:{p}" for p in properties or []),
        ]
    )


def _reusable(
    url: str, path: Path, vo: str | None, group: str | None, properties: list[str] | None
) -> Credentials | None:
    """The stored credentials if they are this DiracX's, of the VO and group asked for, and
    current (refreshed if need be); None when a new sign-in is needed."""
    stored = read_credentials(path)
    if stored is None or properties:
        return None
    claims = stored.claims()
    if str(claims.get("iss", "")).rstrip("/") != url:
        return None
    if (vo and claims.get("vo") != vo) or (group and claims.get("dirac_group") != group):
        return None
    if stored.fresh:
        return stored
    try:
        return refresh(url, path, stored)
    except Unauthenticated:
        return None  # the refresh token has expired too: sign in again


def _device_flow(url: str, scope: str) -> Credentials:
    """DiracX's device flow (RFC 8628), as `dirac login` runs it."""
    try:
        reply = httpx.post(
            f"{url}/api/auth/device",
            params={"client_id": CLIENT_ID, "scope": scope},
            timeout=HTTP_TIMEOUT_S,
        )
    except httpx.HTTPError as error:
        raise Unauthenticated(f"cannot reach DiracX at {url}: {error}") from None
    if reply.status_code != 200:
        raise Unauthenticated(f"DiracX refused the sign-in ({reply.status_code}): {reply.text}")
    flow = reply.json()
    _say(
        f"to sign in, open {flow['verification_uri_complete']} "
        f"(or {flow['verification_uri']} and enter {flow['user_code']})"
    )
    deadline = time.monotonic() + float(flow.get("expires_in", 600))
    while time.monotonic() < deadline:
        answer = token_endpoint_call(
            url,
            {
                "grant_type": DEVICE_GRANT,
                "device_code": flow["device_code"],
                "client_id": CLIENT_ID,
            },
        )
        if answer.status_code == 200:
            return Credentials.from_token_response(answer.json())
        pending = answer.json().get("error") if answer.status_code == 400 else None
        if pending not in ("authorization_pending", "slow_down"):
            raise Unauthenticated(
                f"DiracX ended the sign-in ({answer.status_code}): {answer.text[:300]}"
            )
        time.sleep(POLL_S)
    raise Unauthenticated("the sign-in was not completed before DiracX's code expired")


def logout(ctx: typer.Context) -> None:
    """Sign out: DiracX forgets the refresh token and the stored credentials are removed (as
    `dirac logout` does: it signs you out of DiracX's own CLI too)."""
    directory = _data_dir(ctx)
    record = Login.read(directory)
    path = record.credentials if record else credentials_path()
    try:
        stored = read_credentials(path)
    except DxtsError:
        stored = None
    if stored is not None and stored.refresh_token:
        url = record.url if record else str(stored.claims().get("iss", "")).rstrip("/")
        if url:
            revoke(url, stored.refresh_token)
    path.unlink(missing_ok=True)
    (directory / LOGIN_FILE).unlink(missing_ok=True)
    _say("signed out of DiracX" if record or stored else "not signed in")


def whoami(ctx: typer.Context) -> None:
    """Who dxts takes you for: your VO, your DiracX name and group, and your roles here."""

    async def body(clients: Clients) -> definition_pb2.GetCallerResponse:
        return await clients.definition.GetCaller(definition_pb2.GetCallerRequest())

    me = run(ctx, body)
    name = f"{me.name} ({me.sub})" if me.name else me.sub
    _say(f"user   {name}")
    _say(f"VO     {me.vo}")
    if me.group:
        _say(f"group  {me.group}")
    _say(f"roles  {', '.join(me.roles) or '-'}")
