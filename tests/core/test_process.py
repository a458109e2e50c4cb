"""A server process's start-up errors: one line and exit status 1, not a traceback."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from dxts.core.errors import Unavailable
from dxts.core.grpc.process import run_process

log = logging.getLogger("dxts.test")


class _Settings(BaseModel):
    port: int


async def _database_away() -> None:
    raise Unavailable("cannot open the database at mysql+asyncmy://db/dxts")


async def _bad_settings() -> None:
    _Settings.model_validate({"port": "eighty"})


@pytest.mark.parametrize(
    ("serve", "said"),
    [
        (_database_away, "cannot run the thing: cannot open the database"),
        (_bad_settings, "cannot run the thing: 1 validation error for _Settings"),
    ],
)
def test_a_start_up_error_is_one_line_and_exit_status_1(
    serve: object, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(SystemExit) as exited:
        run_process("thing", serve, log)  # type: ignore[arg-type]
    assert exited.value.code == 1
    assert caplog.records[-1].getMessage().startswith(said)


def test_a_served_process_ends_quietly() -> None:
    async def served() -> None:
        return None

    run_process("thing", served, log)
