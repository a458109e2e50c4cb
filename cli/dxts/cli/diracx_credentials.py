"""DiracX credentials as DiracX's own CLI keeps them, for `dxts login` and every command after it.

DiracX's `dirac login` writes the tokens it got to its credentials file (DIRACX_CREDENTIALS_PATH,
else ~/.cache/diracx/credentials.json): JSON with `access_token`, `refresh_token` and
`expires_on` (a Unix time a little before the access token expires), mode 0600, read and written
under a file lock. dxts reads and writes the same file the same way, so a user signed in with
either is signed in with both, and a token refreshed by one is the other's too.

`dxts login` notes which DiracX it signed in to in the data directory (`LOGIN_FILE`); while that
note is there, every command takes its token from the credentials file, refreshed through
DiracX's token endpoint (with the refresh token) when the access token is about to expire.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from dxts.cli.connection import LOGIN_FILE
from dxts.core.errors import InvalidArgument, Unauthenticated

CREDENTIALS_VARIABLE = "DIRACX_CREDENTIALS_PATH"
URL_VARIABLE = "DIRACX_URL"
DEFAULT_CREDENTIALS = Path("~/.cache/diracx/credentials.json")
# DiracX's public client (its CLI's): the client id its token endpoints expect.
CLIENT_ID = "myDIRACClientID"
# DiracX stores `expires_on` this long before the token really expires (its
# EXPIRES_GRACE_SECONDS); dxts refreshes another minute before that.
EXPIRES_GRACE_S = 15
REFRESH_MARGIN_S = 60
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
HTTP_TIMEOUT_S = 30.0


def credentials_path() -> Path:
    """Where DiracX's CLI keeps the user's tokens."""
    configured = os.environ.get(CREDENTIALS_VARIABLE)
    return Path(configured) if configured else DEFAULT_CREDENTIALS.expanduser()


@dataclass(frozen=True)
class Credentials:
    access_token: str
    refresh_token: str | None
    expires_on: int

    @classmethod
    def from_token_response(cls, response: dict[str, Any]) -> Credentials:
        """As DiracX's CLI stores a token endpoint's answer."""
        expires_in = int(response.get("expires_in", 0))
        return cls(
            access_token=str(response["access_token"]),
            refresh_token=response.get("refresh_token"),
            expires_on=int(time.time()) + expires_in - EXPIRES_GRACE_S,
        )

    @property
    def fresh(self) -> bool:
        return self.expires_on - REFRESH_MARGIN_S > time.time()

    def claims(self) -> dict[str, Any]:
        """The access token's claims, unverified (dxts's server verifies them)."""
        try:
            payload = self.access_token.split(".")[1]
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (IndexError, ValueError):
            return {}
        return claims if isinstance(claims, dict) else {}


def read_credentials(path: Path) -> Credentials | None:
    """The credentials in `path` (under DiracX's shared lock); None if there are none."""
    try:
        with path.open() as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)
            try:
                data = json.load(handle)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise InvalidArgument(f"cannot read the DiracX credentials {path}: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("access_token"), str):
        raise InvalidArgument(f"{path} holds no DiracX access token")
    return Credentials(
        data["access_token"], data.get("refresh_token"), int(data.get("expires_on", 0))
    )


def write_credentials(path: Path, credentials: Credentials) -> None:
    """As DiracX's CLI writes them: mode 0600, under an exclusive lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(descriptor, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            json.dump(
                {
                    "access_token": credentials.access_token,
                    "refresh_token": credentials.refresh_token,
                    "expires_on": credentials.expires_on,
                },
                handle,
            )
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Login:
    """The note `dxts login` leaves in the data directory: which DiracX, which credentials."""

    url: str
    credentials: Path

    @classmethod
    def read(cls, directory: Path) -> Login | None:
        try:
            data = json.loads((directory / LOGIN_FILE).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise InvalidArgument(f"cannot read {directory / LOGIN_FILE}: {error}") from None
        return cls(str(data["url"]), Path(data["credentials"]))

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / LOGIN_FILE).write_text(
            json.dumps({"url": self.url, "credentials": str(self.credentials)}, indent=1) + "\n"
        )

    def access_token(self) -> str:
        """A current access token: the stored one, or one refreshed with the refresh token."""
        stored = read_credentials(self.credentials)
        if stored is None:
            raise Unauthenticated(f"no DiracX credentials at {self.credentials}: run `dxts login`")
        if stored.fresh:
            return stored.access_token
        return refresh(self.url, self.credentials, stored).access_token


def token_endpoint_call(url: str, form: dict[str, str]) -> httpx.Response:
    try:
        return httpx.post(f"{url}/api/auth/token", data=form, timeout=HTTP_TIMEOUT_S)
    except httpx.HTTPError as error:
        raise Unauthenticated(f"cannot reach DiracX at {url}: {error}") from None


def refresh(url: str, path: Path, stored: Credentials) -> Credentials:
    """New tokens for the refresh token (DiracX's refresh grant), stored in `path`."""
    if not stored.refresh_token:
        raise Unauthenticated("the DiracX access token has expired: run `dxts login`")
    reply = token_endpoint_call(
        url,
        {
            "grant_type": "refresh_token",
            "refresh_token": stored.refresh_token,
            "client_id": CLIENT_ID,
        },
    )
    if reply.status_code != 200:
        raise Unauthenticated(
            f"DiracX refused to refresh the sign-in ({reply.status_code}: "
            f"{_detail(reply)}): run `dxts login`"
        )
    answer = reply.json()
    # A refresh token from DiracX's legacy exchange is not rotated: the answer has none, and
    # the one used stays valid.
    answer.setdefault("refresh_token", None)
    answer["refresh_token"] = answer["refresh_token"] or stored.refresh_token
    fresh = Credentials.from_token_response(answer)
    write_credentials(path, fresh)
    return fresh


def revoke(url: str, refresh_token: str) -> None:
    """Ask DiracX to forget a refresh token (RFC 7009): a failure is DiracX's to report."""
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(
            f"{url}/api/auth/revoke",
            data={"token": refresh_token, "client_id": CLIENT_ID},
            timeout=HTTP_TIMEOUT_S,
        )


def _detail(reply: httpx.Response) -> str:
    try:
        body = reply.json()
    except ValueError:
        return " ".join(reply.text.split())[:200]
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("error") or body)[:200]
    return str(body)[:200]
