"""Deadlines: the handler sees the caller's, calls made while serving inherit it, and calls
made outside a request get the default.

gRPC rounds a deadline up when it puts it on the wire (a 2 s timeout can arrive as 2.008 s), so
bounds are checked with a margin far smaller than the difference between the outcomes told
apart (inherited: seconds; not inherited: the 30 s default or the 60 s asked for)."""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from grpc_probe import Probe, unary

from dxts.core.deadlines import DEFAULT_TIMEOUT_S, call_timeout, deadline, time_remaining
from dxts.core.grpc import GrpcServer, channel

MARGIN = 0.5


async def remaining(ch: grpc.aio.Channel, timeout: float | None = None) -> dict[str, float | None]:  # noqa: ASYNC109
    answer = await unary(ch, "Remaining")(StringValue(), timeout=timeout)
    return json.loads(answer.value)  # type: ignore[no-any-return]


async def test_the_handler_sees_the_callers_deadline(client: grpc.aio.Channel) -> None:
    seen = await remaining(client, timeout=5)
    for key in ("context", "inherited"):
        value = seen[key]
        assert value is not None and 0 < value < 5 + MARGIN


async def test_a_call_without_timeout_gets_the_channel_default(
    server: GrpcServer, token: str
) -> None:
    async with channel(server.address, token=token) as ch:
        seen = await remaining(ch)
    assert seen["inherited"] is not None and 5 < seen["inherited"] < DEFAULT_TIMEOUT_S + MARGIN
    async with channel(server.address, token=token, default_timeout=None) as ch:
        assert await remaining(ch) == {"context": None, "inherited": None}


async def test_a_nested_call_inherits_the_remaining_deadline(
    client: grpc.aio.Channel, probe: Probe
) -> None:
    """Nested makes its own call with no timeout: the default (30 s) would apply outside a
    request, but inside one the caller's 4 s bound it."""
    answer = await unary(client, "Nested")(StringValue(), timeout=4)
    seen = json.loads(answer.value)
    nested = seen["nested"]["context"]
    assert nested is not None and 0 < nested < 4 + MARGIN


async def test_an_explicit_timeout_cannot_outlive_the_inherited_deadline(
    client: grpc.aio.Channel, probe: Probe
) -> None:
    probe.nested_timeout = 60
    try:
        answer = await unary(client, "Nested")(StringValue(), timeout=3)
    finally:
        probe.nested_timeout = None
    nested = json.loads(answer.value)["nested"]["context"]
    assert 0 < nested < 3 + MARGIN


async def test_a_deadline_block_bounds_calls_outside_requests(client: grpc.aio.Channel) -> None:
    with deadline(2):
        assert (time_remaining() or 0) <= 2
        seen = await remaining(client)
        with deadline(10):  # never loosens the enclosing deadline
            inner = time_remaining()
    assert seen["context"] is not None and 0 < seen["context"] < 2 + MARGIN
    assert inner is not None and inner <= 2
    assert time_remaining() is None


async def test_a_call_after_the_deadline_fails_at_once(client: grpc.aio.Channel) -> None:
    with deadline(0), pytest.raises(grpc.aio.AioRpcError) as caught:
        await remaining(client)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_call_timeout_takes_the_tightest_bound() -> None:
    assert call_timeout(None) == DEFAULT_TIMEOUT_S
    assert call_timeout(None, default=None) is None
    assert call_timeout(7) == 7
    with deadline(3):
        assert 0 < (call_timeout(7) or 0) <= 3
        assert (call_timeout(1) or 0) == 1
        assert 0 < (call_timeout(None, default=None) or 0) <= 3
    with deadline(-1):
        assert call_timeout(5) == 0.0
