"""Scenario 1 (SQLite and MariaDB): a three-step chain — Seeds → Sim (one seed a parcel) →
Reco (three files a parcel) → Merge (four a parcel) — runs to Completed on its own (the
OutputTarget hook ends the Seeds feeder, each member drains in turn, the finalizing actions
pass), then to Archived after the short archive delay: the bulk rows are gone, the declared
outputs stay in the catalogue while the intermediate ones are removed, and the logs remain.
The backend takes four parcels at a time and refuses the others — its capacity shrank after the
dispatcher last asked — which go back to be claimed again (not an attempt: nothing runs twice)."""

from __future__ import annotations

import asyncio

from e2e_world import PACE_S, Launch, W, check_invariants, seeds, step, workgraph

from dxts.backends.null.settings import NullSettings

FINALIZING = ["NoInputProcessedTwice", "ReconcileFeederInputs", "CheckOutputFiles"]


def chain() -> dict[str, object]:
    return workgraph(
        {"seeds": seeds(12)},
        {
            "Sim": step("seeds", actions={"Finalizing": FINALIZING}),
            "Reco": step(
                "Sim/out", packer="BySize", group_size=3, actions={"Finalizing": FINALIZING}
            ),
            "Merge": step(
                "Reco/out", packer="BySize", group_size=4, actions={"Finalizing": FINALIZING}
            ),
        },
        {"merged": "Merge/out"},
        hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": 12}}},
    )


async def test_a_chain_completes_then_archives(launch: Launch) -> None:
    null = NullSettings(name="null", outputs=["out"], delay_s=0.5)
    async with launch(null=null, archive_delay_s=3.0, status_interval_s=3600) as world:
        await asyncio.sleep(PACE_S)  # the dispatcher's first Describe: no capacity limit
        await world.configure_null(capacity=4)
        wg = await world.submit(chain())
        await world.start(wg)
        await world.reach(wg, W.COMPLETED)
        # Completed for three seconds before archiving starts: time to check everything.
        await check_invariants(world, wg)
        seen = await world.census(wg)
        merged = await world.produced(wg, "Merge/out")
        intermediate = await world.produced(wg, "Sim/out") + await world.produced(wg, "Reco/out")
        assert set(await world.catalogue.files(merged + intermediate)) == {*merged, *intermediate}
        await world.reach(wg, W.ARCHIVED)
        await check_invariants(world, wg, final=W.ARCHIVED, bulk_rows=False)

        assert seen["Sim"]["inputs"] == {"Processed": 12}
        assert seen["Sim"]["parcels"] == {"Done": 12}
        assert seen["Reco"]["inputs"] == {"Processed": 12}
        assert seen["Reco"]["parcels"] == {"Done": 4}
        assert seen["Merge"]["inputs"] == {"Processed": 4}
        assert seen["Merge"]["parcels"] == {"Done": 1}
        assert len(merged) == 1 and len(intermediate) == 16
        # Archiving kept the declared output and removed the intermediate ones.
        assert set(await world.catalogue.files(merged)) == set(merged)
        assert not await world.catalogue.files(intermediate)
        # Every action of every member ran and recorded its result.
        actions = await world.actions(wg)
        assert {key: row.Result for key, row in actions.items()} == {
            **{f"{m}/Finalizing/{n}": "Passed" for m in wg.members for n in (1, 2, 3)},
            **{f"{m}/Archiving/{n}": "Done" for m in wg.members for n in (1, 2)},
            **{f"{m}/Cancelling/{n}": None for m in wg.members for n in (1, 2, 3, 4)},
        }
        # Refused submissions were submitted again; no parcel was started twice (as many
        # starts of work as parcels accepted).
        counters = await world.backend_counters()
        assert counters["refused"] > 0
        assert counters["started"] == counters["accepted"] == 12 + 4 + 1
