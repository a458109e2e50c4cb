"""The sweep runner: pacing after busy, idle and failed rounds, waking, stopping, metrics."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import REGISTRY

from dxts.core.kernel.sweeps import MAX_ERROR_WAIT_S, Pacing, Sweep, SweepRunner


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_pacing_doubles_idle_waits_up_to_the_interval() -> None:
    pacing = Pacing(interval_s=1.0, first_idle_s=0.1)
    waits = [pacing.after_idle(None)]
    for _ in range(6):
        waits.append(pacing.after_idle(waits[-1]))
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def test_pacing_keeps_idle_waits_short_while_work_is_pending() -> None:
    pacing = Pacing(interval_s=30.0, first_idle_s=0.25, pending_s=1.0)
    waits = [pacing.after_idle(None, pending=True)]
    for _ in range(4):
        waits.append(pacing.after_idle(waits[-1], pending=True))
    assert waits == [0.25, 0.5, 1.0, 1.0, 1.0]
    # Nothing pending: the waits grow to the interval again; pending anew: back to the cap.
    assert pacing.after_idle(1.0) == 2.0
    assert pacing.after_idle(16.0) == 30.0
    assert pacing.after_idle(30.0, pending=True) == 1.0


def test_pacing_backs_off_errors_beyond_a_short_interval() -> None:
    pacing = Pacing(interval_s=0.5, error_s=4.0)
    waits = [pacing.after_error(None)]
    for _ in range(5):
        waits.append(pacing.after_error(waits[-1]))
    assert waits == [4.0, 8.0, 16.0, MAX_ERROR_WAIT_S, MAX_ERROR_WAIT_S, MAX_ERROR_WAIT_S]


def test_pacing_refuses_a_wait_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Pacing(interval_s=0)


async def test_a_busy_sweep_runs_again_without_waiting_for_its_interval() -> None:
    backlog = [5, 5, 5, 0]
    done = asyncio.Event()

    async def round_() -> int:
        items = backlog.pop(0) if backlog else 0
        if not backlog:
            done.set()
        return items

    # An hour's interval: only "again at once after work" can drain four rounds in time.
    runner = SweepRunner([Sweep("busy-test", round_, Pacing(interval_s=3600, first_idle_s=3600))])
    runner.start()
    await asyncio.wait_for(done.wait(), timeout=5)
    await runner.stop(grace_s=1)
    assert sample("dxts_sweep_items_total", sweep="busy-test") == 15
    assert sample("dxts_sweep_rounds_total", sweep="busy-test", outcome="busy") == 3
    assert sample("dxts_sweep_rounds_total", sweep="busy-test", outcome="idle") == 1


async def test_an_idle_sweep_waits_and_is_woken_early() -> None:
    rounds = 0
    second = asyncio.Event()

    async def round_() -> int:
        nonlocal rounds
        rounds += 1
        if rounds == 2:
            second.set()
        return 0

    runner = SweepRunner([Sweep("idle-test", round_, Pacing(interval_s=3600, first_idle_s=3600))])
    runner.start()
    await asyncio.sleep(0.2)
    assert rounds == 1  # waiting its (long) first idle pause
    runner.wake("idle-test")
    await asyncio.wait_for(second.wait(), timeout=5)
    await runner.stop(grace_s=1)
    assert rounds == 2


async def test_a_busy_round_wakes_the_sweeps_it_hands_work_to() -> None:
    handed = asyncio.Event()
    produced = [3]

    async def producer() -> int:
        return produced.pop() if produced else 0

    async def consumer() -> int:
        if produced == []:  # the producer's busy round has run
            handed.set()
        return 0

    runner = SweepRunner(
        [
            Sweep("hand-consumer", consumer, Pacing(interval_s=3600, first_idle_s=3600)),
            Sweep(
                "hand-producer",
                producer,
                Pacing(interval_s=3600, first_idle_s=3600),
                then=("hand-consumer",),
            ),
        ]
    )
    runner.start()
    # The consumer's first round may run before the producer's: only the wake brings a second
    # one within the hour.
    await asyncio.wait_for(handed.wait(), timeout=5)
    await runner.stop(grace_s=1)


async def test_a_pending_sweep_is_not_left_waiting_its_interval() -> None:
    rounds = 0
    third = asyncio.Event()

    async def round_() -> int:
        nonlocal rounds
        rounds += 1
        if rounds == 3:
            third.set()
        return 0

    # Without `pending` the first idle wait alone would be an hour.
    pacing = Pacing(interval_s=3600, first_idle_s=3600, pending_s=0.02)
    runner = SweepRunner([Sweep("pending-test", round_, pacing, pending=lambda: True)])
    runner.start()
    await asyncio.wait_for(third.wait(), timeout=5)
    await runner.stop(grace_s=1)


async def test_a_failing_round_is_logged_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0
    recovered = asyncio.Event()

    async def round_() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("database went away")
        recovered.set()
        return 0

    runner = SweepRunner(
        [Sweep("error-test", round_, Pacing(interval_s=3600, first_idle_s=3600, error_s=0.01))]
    )
    with caplog.at_level(logging.ERROR, logger="dxts.core.kernel.sweeps"):
        runner.start()
        await asyncio.wait_for(recovered.wait(), timeout=5)
        await runner.stop(grace_s=1)
    assert "sweep error-test failed" in caplog.text and "database went away" in caplog.text
    assert sample("dxts_sweep_rounds_total", sweep="error-test", outcome="error") == 1


async def test_stop_lets_the_running_round_finish() -> None:
    started, finished = asyncio.Event(), asyncio.Event()

    async def round_() -> int:
        started.set()
        await asyncio.sleep(0.2)
        finished.set()
        return 1

    runner = SweepRunner([Sweep("graceful-test", round_, Pacing(interval_s=1))])
    runner.start()
    await asyncio.wait_for(started.wait(), timeout=5)
    await runner.stop(grace_s=5)
    assert finished.is_set()


async def test_stop_cancels_a_round_that_outlives_the_grace() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def round_() -> int:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 0

    runner = SweepRunner([Sweep("stuck-test", round_, Pacing(interval_s=1))])
    runner.start()
    await asyncio.wait_for(started.wait(), timeout=5)
    await runner.stop(grace_s=0.05)
    assert cancelled.is_set()


async def test_a_runner_cannot_start_twice() -> None:
    async def round_() -> int:
        return 0

    runner = SweepRunner([Sweep("twice-test", round_, Pacing(interval_s=1))])
    runner.start()
    with pytest.raises(RuntimeError, match="already started"):
        runner.start()
    await runner.stop(grace_s=1)
