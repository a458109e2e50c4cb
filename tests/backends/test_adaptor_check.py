"""`dxts adaptor check ADDRESS` against an adaptor that breaks idempotency: it must fail, naming
the property. (The shipped adaptors are checked by the one conformance suite,
tests/backends/test_adaptor_conformance.py, which runs the same checks.)"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from adaptor_serving import serve_adaptor
from typer.testing import CliRunner

from dxts.backends.null.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.cli.adaptor_conformance import PROPERTIES
from dxts.cli.main import app
from dxts.core.adaptor.model import Payload, Submission, SubmitResult
from dxts.core.grpc import DevKeys
from dxts.core.ids import id_to_str, new_id


class ForgetfulAdaptor(NullAdaptor):
    """Breaks the contract's backbone: a second Submit of a key starts it again."""

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        for parcel in parcels:
            job = self.jobs.pop(parcel.parcel_id, None)
            if job is not None:  # forget it: the key is new again
                self.by_identifier[job.identifier].parcel_id = id_to_str(new_id())
        return await super().submit(payload, parcels)


async def test_an_adaptor_breaking_idempotency_fails_naming_the_property(
    tmp_path: Path,
) -> None:
    keys = DevKeys.load_or_create(tmp_path / "keys")
    adaptor = ForgetfulAdaptor(NullSettings())
    await adaptor.start()
    server = await serve_adaptor(adaptor, keys.verifier())
    token = keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
    try:
        result = await asyncio.to_thread(
            CliRunner().invoke, app, ["adaptor", "check", server.address, "--token", token]
        )
    finally:
        await server.stop(grace=0)
        await adaptor.stop()
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert any(
        line.startswith("FAIL idempotent-submit: the same key got two identifiers")
        for line in lines
    ), result.output
    assert "PASS describe: null" in result.output
    # Without --restart-command the restart check is skipped, saying how to run it.
    assert any(
        line.startswith("SKIP restart-in-flight: no way to restart") for line in lines
    ), result.output
    assert lines[-1].startswith(f"1 of {len(PROPERTIES)} properties failed: idempotent-submit")
