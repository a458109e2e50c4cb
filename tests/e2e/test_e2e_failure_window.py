"""The failure-rate auto-pause after a resume (SQLite and MariaDB): PeriodicFlush pauses a member
whose first two seeds fail and are quarantined; an operator resumes it without writing them off,
and it is not paused again on the failures the hook already judged: it judges the work settled
since the resume, which succeeds, and the member runs to the end of its seeds (the two
quarantined inputs keep the workgraph from finishing, so the test stops there)."""

from __future__ import annotations

from pathlib import Path

from e2e_world import I, T, running, seeds, step, workgraph

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.core.db import Database

ASKED = 8
HOOKS = {
    "Active": {
        "hook": "PeriodicFlush",
        "args": {"flush_every_s": None, "min_sample": 2, "min_success_rate": 0.9},
    },
    "HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 1}},
}


async def test_a_resumed_member_is_judged_on_a_fresh_window(
    database: Database, tmp_path: Path
) -> None:
    document = workgraph(
        {"seeds": seeds(ASKED, batch=1)},
        {"Fragile": step("seeds", hooks=HOOKS)},
        {"fragiles": "Fragile/out"},
    )
    null = NullSettings(name="null", outputs=["out"])
    async with running(database, tmp_path, null=null) as world:
        wg = await world.submit(document)
        world.null.settings.rules.append(
            NullRule(fate="failure", output_prefix=f"/{wg.members['Fragile']}/", times=2)
        )
        await world.start(wg)
        await world.member_reaches(wg, "Fragile", T.PAUSED)

        async def both_quarantined() -> bool:
            census = await world.census(wg)
            return census["Fragile"]["inputs"].get(I.PROBLEMATIC.value) == 2

        await world.until("both failed seeds to be quarantined", both_quarantined, wg)
        await world.call("ResumeTransformation", transformation_id=wg.members["Fragile"])

        async def every_seed_settled() -> bool:
            census = await world.census(wg)
            return census["Fragile"]["inputs"] == {
                I.PROCESSED.value: ASKED - 2,
                I.PROBLEMATIC.value: 2,
            }

        await world.until("every seed to settle", every_seed_settled, wg)
        assert (await world.statuses(wg))[1] == {"Fragile": T.ACTIVE}
        _, logs = await world.logs(wg)
        moves = [
            (r.OldStatus, r.NewStatus, r.Author)
            for r in logs["Fragile"]
            if r.EventType == "StateChange" and r.NewStatus in (T.PAUSED, T.ACTIVE)
        ]
        assert moves[:3] == [
            (T.NEW, T.ACTIVE, "olivia"),
            (T.ACTIVE, T.PAUSED, "hook PeriodicFlush"),
            (T.PAUSED, T.ACTIVE, "olivia"),
        ]
        assert [m for m in moves if m[1] == T.PAUSED] == [moves[1]]  # never paused again
