"""ByPartner (docs/extensions.md, "Joining partners") run by the packer runner with execution's
providers, on SQLite and MariaDB: complete sets grouped `group_size` to a parcel, the partner
named by its step input through what the compiler recorded, waiting and missing partners."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import UUID

import runner_support as s
import sqlalchemy as sa
from definition_double import InMemoryTransformations
from test_after_wait import consumer
from test_builtin_packers import Step, facets, files

from dxts.core.db import Database
from dxts.core.schema import execution
from dxts.core.states import InputStatus
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import run_packer


async def _world(
    database: Database,
    definitions: InMemoryTransformations,
    plugins: Any,
    partner_statuses: list[str],
    packer_args: dict[str, Any],
    **annotations: Any,
) -> Any:
    """Reconstructions A and B of the same raw files (B's input for file n in
    `partner_statuses[n]`), and a comparison fed with A's files whose `other` input joins B's."""
    a = Step(database, await s.transformation(database, feeder="List", outputs=["reco"]))
    b = Step(database, await s.transformation(database, feeder="List", outputs=["reco"]))
    definitions.put(a.record)
    definitions.put(b.record)
    for n, status in enumerate(partner_statuses):
        await a.run(f"/lhcb/raw/{n}", "Processed", [f"/lhcb/recoA/{n}"])
        await b.run(f"/lhcb/raw/{n}", status, [f"/lhcb/recoB/{n}"] if status == "Processed" else [])
    consumer = await s.transformation(
        database,
        feeder="Edge",
        feeder_args={"transformation_output_id": str(UUID(bytes=a.output_id))},
        packer="ByPartner",
        packer_args=packer_args,
        annotations={
            "driving_input": "mine",
            "joined": {"other": str(UUID(bytes=b.output_id))},
            **annotations,
        },
    )
    driving = files([(f"/lhcb/recoA/{n}", 2, None) for n in range(len(partner_statuses))])
    await run_feeder(database, plugins, replace(consumer, feeder="List", feeder_args=driving))
    return consumer


async def test_by_partner_groups_complete_sets_and_holds_back_the_rest(
    database: Database, plugins: Any, definitions: InMemoryTransformations
) -> None:
    statuses = ["Processed", "Processed", "Processed", "Assigned", "NotProcessed"]
    consumer = await _world(database, definitions, plugins, statuses, {"group_size": 2})
    # The feeder is active: two complete sets make a parcel, the third waits for company.
    result = await run_packer(database, plugins, replace(consumer, feeder_enabled=True))
    assert (result.parcels, result.delayed, result.problematic) == (1, 1, 1)
    (parcel,) = await facets(database, consumer.id)
    assert parcel.Parameters == {
        "mine": [
            {"class": "File", "location": "lfn:/lhcb/recoA/0", "size": 2},
            {"class": "File", "location": "lfn:/lhcb/recoA/1", "size": 2},
        ],
        "other": [
            {"class": "File", "location": "lfn:/lhcb/recoB/0"},
            {"class": "File", "location": "lfn:/lhcb/recoB/1"},
        ],
    }
    # The parcel records the partner files it joined (EveryPartnerJoined reads them).
    async with database.transaction(s.RC) as conn:
        (annotations,) = (
            await conn.execute(
                sa.select(execution.parcels.c.Annotations).where(
                    execution.parcels.c.ParcelID == parcel.ParcelID
                )
            )
        ).one()
    assert annotations == {"metadata": {"partners": ["/lhcb/recoB/0", "/lhcb/recoB/1"]}}
    rows = {r.LFN: r.Status for r in await s.input_rows(database, consumer.id)}
    assert rows == {
        "/lhcb/recoA/0": "Assigned",
        "/lhcb/recoA/1": "Assigned",
        "/lhcb/recoA/2": "Unassigned",  # complete, held back until the feeder is off
        "/lhcb/recoA/3": "Unassigned",  # its partner is still running
        "/lhcb/recoA/4": "Problematic",  # its partner's input was written off
    }
    # The feeder off, the undersized group leaves; the waiting set stays withheld.
    result = await run_packer(database, plugins, replace(consumer, feeder_enabled=False))
    assert result.parcels == 1
    last = (await facets(database, consumer.id))[-1]
    assert last.Parameters["other"] == [{"class": "File", "location": "lfn:/lhcb/recoB/2"}]
    await s.assert_counters_exact(database, consumer.id)


async def test_by_partner_refuses_a_step_that_joins_nothing_it_names(
    database: Database, plugins: Any, definitions: InMemoryTransformations
) -> None:
    consumer = await _world(
        database, definitions, plugins, ["Processed"], {"partner_input": "elsewhere"}
    )
    result = await run_packer(database, plugins, consumer)
    assert result.error is not None
    assert "step input 'elsewhere' joins no other step's output (joined inputs: other)" in (
        result.error
    )
    assert await facets(database, consumer.id) == []
    assert {r.Status for r in await s.input_rows(database, consumer.id)} == {"Unassigned"}


async def test_by_partner_waits_after_a_staging_of_the_partner_files(
    database: Database, plugins: Any, definitions: InMemoryTransformations
) -> None:
    """`after` a member fed the partner files (a staging, never fed the driving files): a set
    waits until that member has processed its partner's files, instead of for ever."""
    staging = await consumer(
        database,
        plugins,
        {"/lhcb/recoB/0": InputStatus.PROCESSED, "/lhcb/recoB/1": InputStatus.ASSIGNED},
    )
    consumer_t = await _world(
        database,
        definitions,
        plugins,
        ["Processed", "Processed"],
        {"after_delay_s": 0.01},
        after=[str(UUID(bytes=staging.id))],
    )
    result = await run_packer(database, plugins, replace(consumer_t, feeder_enabled=False))
    assert (result.parcels, result.delayed, result.problematic) == (1, 1, 0)
    (parcel,) = await facets(database, consumer_t.id)
    assert parcel.Parameters["other"] == [{"class": "File", "location": "lfn:/lhcb/recoB/0"}]
