"""What the DiracX adaptor's logic needs of DiracX, and how DiracX failing reaches it: the
adaptor is given a `DiracXService` (in production `dxts.backends.diracx.edge.client.DiracXClient`,
DiracX's REST API), so that its logic imports no edge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class DiracXError(Exception):
    """DiracX could not be reached or refused a call: one line saying which and why, and the
    HTTP status DiracX answered (None: no answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class DiracXService(Protocol):
    """The DiracX calls the adaptor makes, as one identity of one VO and group."""

    exchanges: int  # tokens obtained so far (operators and tests read it)

    async def close(self) -> None: ...

    async def submit(self, jdls: Sequence[str]) -> list[int]:
        """Submit one job per JDL; their job ids, in order."""
        ...

    async def search(
        self, search: Sequence[Mapping[str, Any]], parameters: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Every job matching all of `search`, with `parameters`."""
        ...

    async def set_status(
        self,
        job_ids: Sequence[int],
        status: str | None,
        minor_status: str = "",
        *,
        application_status: str | None = None,
        source: str = ...,
        force: bool = False,
    ) -> None: ...

    async def upload_sandbox(self, archive: bytes) -> str:
        """Store a sandbox archive; its PFN."""
        ...

    async def download_sandbox(self, pfn: str) -> bytes: ...

    async def job_sandboxes(self, job_id: int, kind: str) -> list[str]:
        """The PFNs of a job's `kind` ("input", "output") sandboxes."""
        ...
