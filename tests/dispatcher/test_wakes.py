"""The dispatcher's sweeps woken from outside (what `dxts up` wires): a claim sweep on a new
Unassigned parcel, one backend's poll sweep on a finished job; others keep sleeping."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from dxts.core.kernel.sweeps import Pacing, Sweep, SweepRunner
from dxts.dispatcher.component import CLAIM_SWEEP_PREFIX, POLL_SWEEP_PREFIX, DispatcherComponent


async def test_wakes_start_the_named_sweeps_rounds_now() -> None:
    rounds: Counter[str] = Counter()
    second: dict[str, asyncio.Event] = {}
    first: dict[str, asyncio.Event] = {}

    def sweep(name: str) -> Sweep:
        second[name] = asyncio.Event()
        first[name] = asyncio.Event()

        async def round_() -> int:
            rounds[name] += 1
            first[name].set()
            if rounds[name] == 2:
                second[name].set()
            return 0

        # Asleep for an hour after its first (idle) round, unless woken.
        return Sweep(name, round_, Pacing(interval_s=3600, first_idle_s=3600))

    names = [
        f"{CLAIM_SWEEP_PREFIX}compute-0",
        f"{CLAIM_SWEEP_PREFIX}data-0",
        f"{POLL_SWEEP_PREFIX}local",
        f"{POLL_SWEEP_PREFIX}other",
    ]
    runner = SweepRunner([sweep(name) for name in names])
    absent: Any = None
    component = DispatcherComponent(
        dispatcher=absent, forwarder=absent, backends={}, services=[], runner=runner
    )
    runner.start()
    try:
        for name in names:
            await asyncio.wait_for(first[name].wait(), timeout=60)
        component.wake_claims()
        component.wake_poll("local")
        component.wake_poll("not-a-backend")
        for name in names[:3]:
            await asyncio.wait_for(second[name].wait(), timeout=60)
    finally:
        await runner.stop(grace_s=1)
    assert rounds == {names[0]: 2, names[1]: 2, names[2]: 2, names[3]: 1}
