"""GetParcelLogs asks the adaptor for no more than the cap, and when the adaptor does not
answer, the person hears so with a reference, never the transport's own words (addresses,
internal errors), which go to the dispatcher's log under the same reference; a job the backend
has forgotten is refused in those words, not as the parcel not found (which a page shows as
404)."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from dxts.core.adaptor.model import MAX_LOG_BYTES, JobLogs
from dxts.core.errors import FailedPrecondition, NotFound, Unavailable
from dxts.core.identity import Identity
from dxts.dispatcher.logic.backends import BackendUnreachable
from dxts.dispatcher.logic.logs import parcel_logs
from dxts.dispatcher.store.identifiers import ParcelPlace

PARCEL = bytes(range(16))
INTERNALS = "<AioRpcError: StatusCode.UNAVAILABLE ipv4:10.1.2.3:50051 connection refused>"


class Placed:
    """A database that finds the parcel on backend `local`, a user parcel of VO lhcb."""

    async def run(self, work: Any, isolation: Any) -> ParcelPlace:
        return ParcelPlace("Failed", "local", bytes(16), None, "lhcb")


class Adaptor:
    adaptor = "local"

    def __init__(self, reachable: bool, forgotten: bool = False) -> None:
        self.reachable = reachable
        self.forgotten = forgotten
        self.asked: list[int] = []

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs:
        self.asked.append(max_bytes)
        if not self.reachable:
            raise BackendUnreachable(f"backend local: {INTERNALS}", rpc="GetLogs")
        if self.forgotten:
            raise NotFound("job", identifier)
        return JobLogs(stdout="ok")


async def ask(adaptor: Adaptor, max_bytes: int) -> Any:
    return await parcel_logs(
        Placed(),  # type: ignore[arg-type]
        {"local": adaptor},  # type: ignore[dict-item]
        None,  # type: ignore[arg-type]
        Identity("lhcb", "pia"),
        PARCEL,
        max_bytes,
    )


async def test_the_adaptor_is_asked_for_no_more_than_the_cap() -> None:
    adaptor = Adaptor(reachable=True)
    await ask(adaptor, 2**62)
    await ask(adaptor, 10)
    assert adaptor.asked == [MAX_LOG_BYTES, 10]


async def test_an_unreachable_adaptor_is_named_without_its_transport_words(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING), pytest.raises(Unavailable) as refused:
        await ask(Adaptor(reachable=False), 0)
    said = str(refused.value)
    assert "10.1.2.3" not in said and "AioRpcError" not in said
    reference = re.search(r"reference ([0-9a-f-]{36})", said)
    assert reference is not None
    logged = [r.getMessage() for r in caplog.records if reference.group(1) in r.getMessage()]
    assert len(logged) == 1 and "10.1.2.3" in logged[0]


async def test_a_job_the_backend_forgot_is_refused_as_such_not_as_an_unknown_parcel() -> None:
    with pytest.raises(FailedPrecondition) as refused:
        await ask(Adaptor(reachable=True, forgotten=True), 0)
    assert str(refused.value).startswith(
        "backend local no longer knows job 00000000-0000-0000-0000-000000000000 of parcel "
        "00010203-0405-0607-0809-0a0b0c0d0e0f"
    )
