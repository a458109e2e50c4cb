"""A small client of DiracX's REST API over plain HTTP (httpx): the calls the adaptor makes, and
the ones a pilot makes (the tests' pilot uses the same client).

The credential is a DiracX legacy-exchange key: traded for an access token as one user in one
VO and group (`GET /api/auth/legacy-exchange`), and traded again `refresh_margin_s` before the
token expires, or at once when DiracX answers 401. Only this client's own token is ever sent to
DiracX; the presigned sandbox-store URLs DiracX hands out are fetched without it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from dxts.backends.diracx.logic import sandbox
from dxts.backends.diracx.logic.service import DiracXError
from dxts.backends.diracx.settings import DiracXSettings

SOURCE = "dxts"
MAX_PER_PAGE = 10000


class DiracXClient:
    """The `DiracXService` the adaptor is given in production (`for_settings`)."""

    @classmethod
    def for_settings(cls, settings: DiracXSettings) -> DiracXClient:
        """The client of the adaptor's own DiracX identity."""
        return cls(
            settings.url,
            api_key=settings.api_key.get_secret_value(),
            vo=settings.vo,
            group=settings.group,
            username=settings.username,
            refresh_margin_s=settings.refresh_margin_s,
            verify=settings.verify_tls,
            timeout_s=settings.timeout_s,
        )

    def __init__(
        self,
        url: str,
        *,
        api_key: str,
        vo: str,
        group: str,
        username: str,
        refresh_margin_s: float = 300.0,
        verify: bool | str = True,
        timeout_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, verify=verify, timeout=timeout_s)
        self._storage = httpx.AsyncClient(verify=verify, timeout=timeout_s)  # presigned URLs
        self._api_key = api_key
        self._scope = f"vo:{vo} group:{group}"
        self._username = username
        self._margin = refresh_margin_s
        self._clock = clock
        self._token: str | None = None
        self._expires_at = 0.0
        self._lock = asyncio.Lock()
        self.exchanges = 0  # tokens obtained so far (operators and tests read it)

    async def close(self) -> None:
        await self._http.aclose()
        await self._storage.aclose()

    # -- the token ------------------------------------------------------------------------------

    async def _exchange(self) -> None:
        try:
            reply = await self._http.get(
                "/api/auth/legacy-exchange",
                params={"preferred_username": self._username, "scope": self._scope},
                headers={"Authorization": f"Bearer diracx:legacy:{self._api_key}"},
            )
        except httpx.HTTPError as error:
            raise DiracXError(f"DiracX at {self.url} is unreachable: {error}") from None
        if reply.status_code != 200:
            raise DiracXError(
                f"DiracX refused the adaptor's credentials ({reply.status_code}): {_detail(reply)}"
            )
        body = reply.json()
        self._token = body["access_token"]
        self._expires_at = self._clock() + float(body["expires_in"])
        self.exchanges += 1

    async def token(self) -> str:
        """A token valid for at least `refresh_margin_s` more (or as long as DiracX gives)."""
        async with self._lock:
            if self._token is None or self._clock() >= self._expires_at - self._margin:
                await self._exchange()
            assert self._token is not None
            return self._token

    async def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        for attempt in range(2):
            token = await self.token()
            try:
                reply = await self._http.request(
                    method, path, headers={"Authorization": f"Bearer {token}"}, **kwargs
                )
            except httpx.HTTPError as error:
                raise DiracXError(f"DiracX at {self.url} is unreachable: {error}") from None
            if reply.status_code == 401 and attempt == 0:
                async with self._lock:
                    if self._token == token:
                        self._token = None  # revoked or expired early: trade the key again
                continue
            if reply.status_code >= 400:
                raise DiracXError(
                    f"DiracX answered {reply.status_code} to {method} {path}: {_detail(reply)}",
                    reply.status_code,
                )
            return reply
        raise AssertionError("unreachable")

    # -- jobs -----------------------------------------------------------------------------------

    async def submit(self, jdls: Sequence[str]) -> list[int]:
        """The JobIDs of the new jobs, in order (one DiracX call; at most 20 jobs in 0.7.0)."""
        reply = await self._call("POST", "/api/jobs/jdl", json=list(jdls))
        return [int(job["JobID"]) for job in reply.json()]

    async def search(
        self, search: Sequence[Mapping[str, Any]], parameters: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Every job matching all of `search`, with `parameters` (pages followed)."""
        found: list[dict[str, Any]] = []
        page = 1
        while True:
            reply = await self._call(
                "POST",
                "/api/jobs/search",
                params={"page": page, "per_page": MAX_PER_PAGE},
                json={"parameters": list(parameters), "search": list(search)},
            )
            if reply.status_code == 416:
                return found
            batch = reply.json()
            found.extend(batch)
            if reply.status_code != 206 or not batch:
                return found
            page += 1

    async def set_status(
        self,
        job_ids: Sequence[int],
        status: str | None,
        minor_status: str = "",
        *,
        application_status: str | None = None,
        source: str = SOURCE,
        force: bool = False,
    ) -> None:
        update: dict[str, str] = {"Source": source}
        if status is not None:
            update["Status"] = status
        if minor_status:
            update["MinorStatus"] = minor_status
        if application_status is not None:
            update["ApplicationStatus"] = application_status
        stamp = datetime.now(UTC).isoformat()
        await self._call(
            "PATCH",
            "/api/jobs/status",
            params={"force": "true"} if force else None,
            json={str(job_id): {stamp: update} for job_id in job_ids},
        )

    async def heartbeat(self, beats: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Report running jobs; the commands (e.g. Kill) DiracX holds for them."""
        reply = await self._call(
            "PATCH", "/api/jobs/heartbeat", json={str(k): dict(v) for k, v in beats.items()}
        )
        return list(reply.json())

    async def set_parameters(self, parameters: Mapping[int, Mapping[str, Any]]) -> None:
        await self._call(
            "PATCH", "/api/jobs/metadata", json={str(k): dict(v) for k, v in parameters.items()}
        )

    # -- sandboxes ------------------------------------------------------------------------------

    async def upload_sandbox(self, archive: bytes) -> str:
        """Store a tar.bz2 archive in the sandbox store; its PFN (`SB:...`)."""
        reply = await self._call(
            "POST",
            "/api/jobs/sandbox",
            json={
                "checksum_algorithm": sandbox.CHECKSUM_ALGORITHM,
                "checksum": sandbox.checksum(archive),
                "size": len(archive),
                "format": sandbox.FORMAT,
            },
        )
        upload = reply.json()
        if upload.get("url"):
            try:
                stored = await self._storage.post(
                    upload["url"],
                    data=upload.get("fields") or {},
                    files={"file": ("sandbox.tar.bz2", archive)},
                )
            except httpx.HTTPError as error:
                raise DiracXError(f"the sandbox store is unreachable: {error}") from None
            if stored.status_code >= 400:
                raise DiracXError(f"the sandbox store refused an upload ({stored.status_code})")
        return str(upload["pfn"])

    async def download_sandbox(self, pfn: str) -> bytes:
        reply = await self._call("GET", "/api/jobs/sandbox", params={"pfn": pfn})
        try:
            fetched = await self._storage.get(reply.json()["url"])
        except httpx.HTTPError as error:
            raise DiracXError(f"the sandbox store is unreachable: {error}") from None
        if fetched.status_code >= 400:
            raise DiracXError(f"the sandbox store refused a download ({fetched.status_code})")
        return fetched.content

    async def job_sandboxes(self, job_id: int, kind: str) -> list[str]:
        """The PFNs of a job's `input` or `output` sandboxes."""
        reply = await self._call("GET", f"/api/jobs/{job_id}/sandbox/{kind}")
        return [str(pfn) for pfn in reply.json()]

    async def assign_output_sandbox(self, job_id: int, pfn: str) -> None:
        await self._call("PATCH", f"/api/jobs/{job_id}/sandbox/output", json=pfn)


def _detail(reply: httpx.Response) -> str:
    try:
        detail = reply.json().get("detail", reply.text)
    except ValueError:
        detail = reply.text
    return str(detail)[:300]
