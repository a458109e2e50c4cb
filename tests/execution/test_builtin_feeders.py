"""The built-in feeders (Seeds, Query, Edge, List) run by the feeder runner with execution's
providers, on SQLite and MariaDB."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import UUID

import pytest
import runner_support as s
import sqlalchemy as sa
from definition_double import InMemoryTransformations

from dxts.core.builtins.feeders import in_sample
from dxts.core.catalogue import CatalogueFile, LocalFileCatalogue
from dxts.core.counters import journal_inputs, journal_parcels
from dxts.core.db import Database, db_now
from dxts.core.errors import InvalidArgument
from dxts.core.ids import input_hash, mint_after, new_id, new_ids
from dxts.core.plugins import Phase
from dxts.core.schema import execution
from dxts.core.states import TransformationStatus
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.store import watermark

RC = s.RC


async def lfns(database: Database, transformation_id: bytes) -> list[str]:
    return [r.LFN or str(r.Descriptor) for r in await s.input_rows(database, transformation_id)]


async def bookmark(database: Database, transformation_id: bytes) -> Any:
    return (await s.feeder_row(database, transformation_id)).bookmark


async def again(database: Database, plugins: Any, t: Any, **options: Any) -> Any:
    """The next sweep's invocation: the switch as the definition side lists it (the feeder
    reads its bookmark itself)."""
    row = await s.transformation_row(database, t.id)
    t = replace(t, feeder_enabled=bool(row.FeederEnabled))
    return await run_feeder(database, plugins, replace(t, **options))


# ------------------------------------------------------------------------------------ Seeds


async def test_seeds_issue_up_to_the_target_with_an_exact_cursor(
    database: Database, plugins: Any
) -> None:
    args = {"target_events": 10, "events_per_seed": 3, "batch": 6}
    t = await s.transformation(database, feeder="Seeds", feeder_args=args)
    first = await run_feeder(database, plugins, t)
    assert (first.inserted, await bookmark(database, t.id)) == (2, {"next_seed": 2})
    await again(database, plugins, t)
    assert (await bookmark(database, t.id)) == {"next_seed": 4}  # 12 events ≥ 10: done
    assert (await again(database, plugins, t)).yielded == 0
    seeds = [r.Descriptor for r in await s.input_rows(database, t.id)]
    assert seeds == [{"seed": n} for n in range(4)]
    await s.assert_counters_exact(database, t.id)


async def test_seeds_scout_their_sample_and_continue_from_it(
    database: Database, plugins: Any
) -> None:
    args = {"target_events": 9, "events_per_seed": 3, "scouting_events": 4}
    t = await s.transformation(database, feeder="Seeds", feeder_args=args)
    assert (await run_feeder(database, plugins, replace(t, scouting=True))).inserted == 2
    assert (await again(database, plugins, t, scouting=False)).inserted == 1  # seed 2: 9 events
    # Without a sample of its own (the scouting hook's ladder sets it) a scout issues nothing.
    bare = {"target_events": 9, "events_per_seed": 3}
    plugins.validate_args("feeder", "Seeds", bare, phase=Phase.SCOUTING)
    waiting = await s.transformation(database, feeder="Seeds", feeder_args=bare)
    assert (await run_feeder(database, plugins, replace(waiting, scouting=True))).inserted == 0


async def test_seeds_keep_the_events_in_flight_under_the_ceiling(
    database: Database, plugins: Any
) -> None:
    args = {"target_events": 100, "events_per_seed": 10, "max_in_flight": 30}
    t = await s.transformation(database, feeder="Seeds", feeder_args=args)
    assert (await run_feeder(database, plugins, t)).inserted == 3
    assert (await again(database, plugins, t)).yielded == 0  # 3 Unassigned seeds in flight
    rows = await s.input_rows(database, t.id)
    await _settle(database, t.id, [bytes(rows[0].InputID)])  # one seed's work is done
    assert (await again(database, plugins, t)).inserted == 1


async def _settle(database: Database, transformation_id: bytes, input_ids: list[bytes]) -> None:
    table = execution.inputs
    async with database.transaction(RC) as conn:
        moved = (
            await conn.execute(
                sa.update(table)
                .where(
                    table.c.TransformationID == transformation_id, table.c.InputID.in_(input_ids)
                )
                .values(Status="Processed")
            )
        ).rowcount
        await journal_inputs(conn, {(transformation_id, "Unassigned", "Processed"): moved})


# ------------------------------------------------------------------------------------ Query


def bk(lfn: str, run: int, kind: str = "DST", **extra: Any) -> CatalogueFile:
    return CatalogueFile(
        lfn=lfn, size=run, metadata={"run": run, "file_type": kind, "config": "c1", **extra}
    )


async def test_query_feeds_the_selection_after_its_watermark(
    database: Database, plugins: Any, catalogue: LocalFileCatalogue
) -> None:
    await catalogue.register([bk(f"/lhcb/q/a{run}", run) for run in (10, 11, 12, 13)])
    await catalogue.register([bk("/lhcb/q/raw", 11, "RAW"), bk("/lhcb/q/other", 11, config="c2")])
    args = {
        "conditions": {"config": "c1"},
        "file_type": "DST",
        "start_run": 11,
        "end_run": 13,
        "page_size": 2,
        "exhaust_after_pass": False,
    }
    t = await s.transformation(database, feeder="Query", feeder_args=args)
    result = await run_feeder(database, plugins, t)
    assert (result.inserted, sorted(await lfns(database, t.id))) == (
        3,
        ["/lhcb/q/a11", "/lhcb/q/a12", "/lhcb/q/a13"],
    )
    assert [r.Descriptor for r in await s.input_rows(database, t.id)] == [
        {"run": 11},
        {"run": 12},
        {"run": 13},
    ]
    state = await bookmark(database, t.id)
    assert set(state) == {"query", "watermark"}
    assert (await again(database, plugins, t)).yielded == 0  # nothing new after the watermark
    await catalogue.register([bk("/lhcb/q/a12b", 12)])
    late = await again(database, plugins, t)
    assert (late.yielded, late.inserted) == (1, 1)
    # A changed selection starts a full pass; what the transformation has is dropped on insert.
    wider = await again(database, plugins, t, feeder_args={**args, "start_run": 10})
    assert (wider.yielded, wider.inserted) == (5, 1)
    await s.assert_counters_exact(database, t.id)


async def test_query_scouts_a_sample_and_can_exhaust(
    database: Database, plugins: Any, catalogue: LocalFileCatalogue
) -> None:
    files = [bk(f"/lhcb/s/f{i:03d}", 500 + i % 3) for i in range(60)]
    await catalogue.register(files)
    runs = {"conditions": {"config": "c1"}, "start_run": 500, "end_run": 502}
    t = await s.transformation(
        database, feeder="Query", feeder_args={**runs, "scouting_runs": [501]}
    )
    await run_feeder(database, plugins, replace(t, scouting=True))
    assert sorted(await lfns(database, t.id)) == [f.lfn for f in files if f.metadata["run"] == 501]
    sampled = await s.transformation(
        database, feeder="Query", feeder_args={**runs, "scouting_fraction": 0.3}
    )
    await run_feeder(database, plugins, replace(sampled, scouting=True))
    expected = sorted(f.lfn for f in files if in_sample(f.lfn, 0.3))
    assert sorted(await lfns(database, sampled.id)) == expected and 0 < len(expected) < 60
    done = await s.transformation(
        database, feeder="Query", feeder_args={**runs, "exhaust_after_pass": True}
    )
    result = await run_feeder(database, plugins, done)
    assert result.exhausted and result.inserted == 60
    assert (await s.feeder_row(database, done.id)).exhausted is True
    with pytest.raises(InvalidArgument, match="outside"):
        plugins.validate_args(
            "feeder", "Query", {**runs, "scouting_runs": [9]}, phase=Phase.SCOUTING
        )


# ------------------------------------------------------------------------------------- Edge


async def produced(database: Database, producer: Any, lfns_made: list[str]) -> bytes:
    """One Done parcel of `producer` that made `lfns_made` under its output, written as the
    recorder writes outputs (under the output's watermark lock); returns the parcel id."""
    parcel_id = new_id()
    output_id = producer.outputs[0].output_id
    async with database.transaction(RC) as conn:
        now = await db_now(conn)
        await conn.execute(
            sa.insert(execution.parcels).values(
                ParcelID=parcel_id,
                TransformationID=producer.id,
                Kind="Compute",
                Status="Done",
                UpdatedAt=now,
                CompletedAt=now,
            )
        )
        await journal_parcels(conn, {(producer.id, None, "Done"): 1})
        floor = await watermark.hold_outputs(conn, [output_id])
        if floor is not None:
            mint_after(floor)
        await conn.execute(
            sa.insert(execution.parcel_outputs),
            [
                {
                    "TransformationOutputID": output_id,
                    "OutputID": oid,
                    "ParcelID": parcel_id,
                    "LFN": lfn,
                    "LFNSize": 5,
                }
                for oid, lfn in zip(new_ids(len(lfns_made)), lfns_made, strict=True)
            ],
        )
    return parcel_id


async def edge_pair(database: Database, definitions: InMemoryTransformations) -> tuple[Any, Any]:
    producer = await s.transformation(database, feeder="Seeds", outputs=["out"])
    definitions.put(producer)
    args = {"transformation_output_id": str(UUID(bytes=producer.outputs[0].output_id))}
    consumer = await s.transformation(database, feeder="Edge", feeder_args={**args, "page_size": 2})
    return producer, consumer


async def test_edge_feeds_committed_files_at_once_in_output_order(
    database: Database, plugins: Any, definitions: InMemoryTransformations
) -> None:
    producer, consumer = await edge_pair(database, definitions)
    assert (await run_feeder(database, plugins, consumer)).yielded == 0  # nothing produced yet
    await produced(database, producer, ["/lhcb/e/1", "/lhcb/e/2", "/lhcb/e/3"])
    result = await run_feeder(database, plugins, consumer)
    assert (result.inserted, result.exhausted) == (3, False)  # no margin: fed at once
    assert await lfns(database, consumer.id) == ["/lhcb/e/1", "/lhcb/e/2", "/lhcb/e/3"]
    state = await bookmark(database, consumer.id)
    async with database.transaction(RC) as conn:
        third = await conn.scalar(
            sa.select(execution.parcel_outputs.c.OutputID).where(
                execution.parcel_outputs.c.LFN == "/lhcb/e/3"
            )
        )
    assert UUID(state["after"]) == UUID(bytes=bytes(third))
    assert (await again(database, plugins, consumer)).yielded == 0
    await produced(database, producer, ["/lhcb/e/4", "/lhcb/e/5"])
    later = await again(database, plugins, consumer)
    assert (later.inserted, later.exhausted) == (2, False)
    fed = await s.input_rows(database, consumer.id)
    assert sorted(r.LFN for r in fed) == [f"/lhcb/e/{n}" for n in range(1, 6)]
    assert {(r.LFNSize, r.Descriptor) for r in fed} == {(5, None)}
    await s.assert_counters_exact(database, consumer.id)


async def test_edge_outputs_minted_by_a_clock_behind_still_sort_after_the_watermark(
    database: Database, plugins: Any, definitions: InMemoryTransformations
) -> None:
    """A replica whose clock lags mints after what is committed, so the bookmark never passes
    what it writes next."""
    producer, consumer = await edge_pair(database, definitions)
    await produced(database, producer, ["/lhcb/c/1"])
    ahead = (int.from_bytes(new_id()) + (30_000 << 80)).to_bytes(16)  # 30 s ahead
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.update(execution.parcel_outputs)
            .where(execution.parcel_outputs.c.LFN == "/lhcb/c/1")
            .values(OutputID=ahead)
        )
    assert (await run_feeder(database, plugins, consumer)).inserted == 1
    await produced(database, producer, ["/lhcb/c/2"])  # minted after the row from ahead
    assert (await again(database, plugins, consumer)).inserted == 1
    assert await lfns(database, consumer.id) == ["/lhcb/c/1", "/lhcb/c/2"]


async def test_recording_mints_after_the_largest_output_id_of_every_output_it_writes(
    database: Database,
) -> None:
    producer = await s.transformation(database, feeder="Seeds", outputs=["a", "b"])
    parcel_id = await produced(database, producer, ["/lhcb/m/first"])  # under the first output
    first, second = (o.output_id for o in producer.outputs)
    async with database.transaction(RC) as conn:
        assert await watermark.hold_outputs(conn, [second]) is None  # nothing under it yet
        floor = await watermark.hold_outputs(conn, [first, second])
    assert floor is not None
    mint_after(floor)
    ids = new_ids(3)
    assert ids[0] > floor
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.insert(execution.parcel_outputs),
            [
                {
                    "TransformationOutputID": output,
                    "OutputID": oid,
                    "ParcelID": parcel_id,
                    "LFN": f"/lhcb/m/{n}",
                    "LFNSize": 1,
                }
                for n, (output, oid) in enumerate(zip((first, second, first), ids, strict=True))
            ],
        )
    async with database.transaction(RC) as conn:
        assert await watermark.hold_outputs(conn, [second, first]) == ids[2]
        assert await watermark.hold_outputs(conn, [second]) == ids[1]
        assert await watermark.settled_through(conn, first) == ids[2]


async def test_edge_exhausts_once_the_producer_is_drained_and_read(
    database: Database, plugins: Any, definitions: InMemoryTransformations
) -> None:
    producer, consumer = await edge_pair(database, definitions)
    await produced(database, producer, ["/lhcb/d/1"])
    # The producer's feeder is off but one of its inputs is Failed, awaiting its hook: live.
    definitions.update(producer.id, feeder_enabled=False)
    failed = new_id()
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.insert(execution.inputs).values(
                TransformationID=producer.id,
                InputID=failed,
                InputHash=input_hash(None, {"seed": 1}),
                Descriptor={"seed": 1},
                Status="Failed",
                UpdatedAt=await db_now(conn),
            )
        )
        await journal_inputs(conn, {(producer.id, None, "Failed"): 1})
    waiting = await run_feeder(database, plugins, consumer)
    assert (waiting.inserted, waiting.exhausted) == (1, False)
    await produced(database, producer, ["/lhcb/d/2"])
    async with database.transaction(RC) as conn:  # the hook gives up on it
        table = execution.inputs
        await conn.execute(
            sa.update(table).where(table.c.InputID == failed).values(Status="NotProcessed")
        )
        await journal_inputs(conn, {(producer.id, "Failed", "NotProcessed"): 1})
    drained = await again(database, plugins, consumer)
    assert (drained.inserted, drained.exhausted) == (1, True)
    assert (await s.feeder_row(database, consumer.id)).exhausted is True
    assert await lfns(database, consumer.id) == ["/lhcb/d/1", "/lhcb/d/2"]


async def test_edge_does_not_exhaust_on_a_producer_that_is_not_active(
    database: Database, plugins: Any, definitions: InMemoryTransformations
) -> None:
    producer, consumer = await edge_pair(database, definitions)
    definitions.update(producer.id, feeder_enabled=False, status=TransformationStatus.PAUSED)
    await produced(database, producer, ["/lhcb/p/1"])
    result = await run_feeder(database, plugins, consumer)
    assert (result.inserted, result.exhausted) == (1, False)


# ------------------------------------------------------------------------------------- List


async def test_list_feeds_its_items_from_the_cursor_then_exhausts(
    database: Database, plugins: Any
) -> None:
    items = [
        {"lfn": "/lhcb/l/a", "lfn_size": 1},
        {"descriptor": {"run": 7}},
        {"lfn": "/lhcb/l/b", "lfn_size": 2, "descriptor": {"mask": "1-2"}},
    ]
    t = await s.transformation(database, feeder="List", feeder_args={"inputs": items})
    await s.set_bookmark(database, t.id, {"next": 1})  # an earlier pass fed the first
    result = await run_feeder(database, plugins, t)
    assert (result.inserted, result.exhausted, result.bookmark) == (2, True, {"next": 3})
    rows = await s.input_rows(database, t.id)
    assert {(r.LFN, str(r.Descriptor)) for r in rows} == {
        (None, str({"run": 7})),
        ("/lhcb/l/b", str({"mask": "1-2"})),
    }
    for bad, fragment in [
        ({"inputs": [{"lfn": "/lhcb/x"}]}, "lfn_size"),
        ({"inputs": [{"lfn_size": 3}]}, "without an lfn"),
        ({"inputs": [{}]}, "non-empty descriptor"),
        ({"inputs": []}, "at least 1"),
    ]:
        with pytest.raises(InvalidArgument, match=fragment):
            plugins.validate_args("feeder", "List", bad, phase=Phase.ACTIVE)
