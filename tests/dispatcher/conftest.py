"""Fixtures of the dispatcher tests: signing keys, and a null adaptor served over real gRPC."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from dispatch_support import Keys, serve

from dxts.backends.edge.dispatcher_client import GrpcOutcomeReporter
from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return Keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture
async def null_adaptors(keys: Keys) -> AsyncIterator[Callable[..., Any]]:
    """`await start(adaptor_class=NullAdaptor, **settings)` → (adaptor, address); all stopped
    at the end of the test."""
    running: list[Any] = []

    async def start(cls: type[NullAdaptor] = NullAdaptor, **settings: Any) -> tuple[Any, str]:
        chosen = NullSettings(**settings)
        reporter = (
            GrpcOutcomeReporter(chosen.dispatcher_address, token=keys.adaptor_token(chosen.name))
            if chosen.dispatcher_address
            else None
        )
        adaptor = cls(chosen, reporter=reporter)
        await adaptor.start()
        server = await serve(adaptor, keys)
        running.append((adaptor, server))
        return adaptor, server.address

    yield start
    for adaptor, server in running:
        await server.stop(grace=0)
        await adaptor.stop()
