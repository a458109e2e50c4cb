"""ByPartner (docs/extensions.md, "Joining partners") run by the packer runner with execution's
providers, on SQLite and MariaDB: complete sets grouped `group_size` to a parcel, the partner
named by its step input through what the compiler recorded, waiting and missing partners."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import UUID

import pytest
import runner_support as s
import sqlalchemy as sa
from definition_double import InMemoryTransformations
from test_after_wait import consumer
from test_builtin_packers import Step, facets, files

from dxts.core.counters import journal_inputs, journal_parcels
from dxts.core.db import Database, db_now
from dxts.core.ids import new_id
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
    packer: str = "ByPartner",
    **annotations: Any,
) -> tuple[Any, Step]:
    """Reconstructions A and B of the same raw files (B's input for file n in
    `partner_statuses[n]`), and a comparison fed with A's files whose `other` input joins B's:
    (the comparison, B)."""
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
        packer=packer,
        packer_args=packer_args,
        annotations={
            "driving_input": "mine",
            "joined": {"other": str(UUID(bytes=b.output_id))},
            **annotations,
        },
    )
    driving = files([(f"/lhcb/recoA/{n}", 2, None) for n in range(len(partner_statuses))])
    await run_feeder(database, plugins, replace(consumer, feeder="List", feeder_args=driving))
    return consumer, b


async def _partner_ends(database: Database, step: Step, source: str, produced: str) -> None:
    """B's Assigned input on `source` is processed by a new parcel that made `produced` (what
    recording writes, with its counter deltas)."""
    tid, parcel_id = step.record.id, new_id()
    i = execution.inputs.c
    async with database.transaction(s.RC) as conn:
        now = await db_now(conn)
        await conn.execute(
            sa.insert(execution.parcels).values(
                ParcelID=parcel_id,
                TransformationID=tid,
                Kind="Compute",
                Status="Done",
                UpdatedAt=now,
            )
        )
        await journal_parcels(conn, {(tid, None, "Done"): 1})
        (input_id,) = (
            await conn.execute(
                sa.select(i.InputID).where(i.TransformationID == tid, i.LFN.in_([source]))
            )
        ).scalars()
        await conn.execute(
            sa.update(execution.inputs)
            .where(i.TransformationID == tid, i.InputID == input_id)
            .values(Status="Processed", LastParcelID=parcel_id, UpdatedAt=now)
        )
        await journal_inputs(conn, {(tid, "Assigned", "Processed"): 1})
        await conn.execute(
            sa.insert(execution.parcel_inputs).values(
                TransformationID=tid, ParcelID=parcel_id, InputID=input_id
            )
        )
        await conn.execute(
            sa.insert(execution.parcel_outputs).values(
                TransformationOutputID=step.output_id,
                OutputID=new_id(),
                ParcelID=parcel_id,
                LFN=produced,
                LFNSize=2,
            )
        )


async def test_by_partner_groups_complete_sets_and_holds_back_the_rest(
    database: Database, plugins: Any, definitions: InMemoryTransformations
) -> None:
    statuses = ["Processed", "Processed", "Processed", "Assigned", "NotProcessed"]
    consumer, _ = await _world(database, definitions, plugins, statuses, {"group_size": 2})
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
    consumer, _ = await _world(
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
    consumer_t, _ = await _world(
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


@pytest.mark.parametrize(
    ("packer", "args"),
    [
        ("ByPartner", {"group_size": 1}),
        ("Join", {"partner_input": "other", "input_parameter": "mine"}),
    ],
)
async def test_a_withheld_set_is_packed_once_its_partner_is_made_not_after_the_delay(
    database: Database,
    plugins: Any,
    definitions: InMemoryTransformations,
    packer: str,
    args: dict[str, Any],
) -> None:
    """RecoA ends before RecoB: both sets meet the packer before their partners are made and
    are withheld (for the default 15 minutes). The next invocation after RecoB made one partner
    packs that set, and leaves the other withheld; a round with no new partner offers nothing;
    the second partner made, its set is packed."""
    statuses = ["Assigned", "Assigned"]
    consumer, b = await _world(database, definitions, plugins, statuses, {}, packer=packer)
    if packer == "Join":
        args = {**args, "partner": str(UUID(bytes=b.output_id))}
    consumer = replace(consumer, packer_args=args, feeder_enabled=False)
    result = await run_packer(database, plugins, consumer)
    assert (result.parcels, result.delayed) == (0, 2)
    withheld = {r.LFN: r.DelayedUntil for r in await s.input_rows(database, consumer.id)}[
        "/lhcb/recoA/1"
    ]
    await _partner_ends(database, b, "/lhcb/raw/0", "/lhcb/recoB/0")
    result = await run_packer(database, plugins, consumer)
    assert (result.released, result.parcels, result.delayed) == (1, 1, 0)
    (parcel,) = await facets(database, consumer.id)
    assert parcel.Parameters["other"] == [{"class": "File", "location": "lfn:/lhcb/recoB/0"}]
    rows = {r.LFN: r for r in await s.input_rows(database, consumer.id)}
    assert rows["/lhcb/recoA/0"].Status == "Assigned"
    # The other set's partner is not made: it is left withheld, not looked up again.
    assert (rows["/lhcb/recoA/1"].Status, rows["/lhcb/recoA/1"].DelayedUntil) == (
        "Unassigned",
        withheld,
    )
    result = await run_packer(database, plugins, consumer)
    assert (result.released, result.offered) == (0, 0)
    await _partner_ends(database, b, "/lhcb/raw/1", "/lhcb/recoB/1")
    result = await run_packer(database, plugins, consumer)
    assert (result.released, result.parcels) == (1, 1)
    assert {r.Status for r in await s.input_rows(database, consumer.id)} == {"Assigned"}
    await s.assert_counters_exact(database, consumer.id)
