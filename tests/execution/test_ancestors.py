"""LHCbAncestors and AncestorLookup (docs/extensions.md, "Files with their ancestors") run by
the feeder and packer runners with execution's providers, on SQLite and MariaDB, over a
catalogue whose lineage is RAW → RDST → DST (each file's metadata lists its parents)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any
from uuid import UUID

import runner_support as s
import sqlalchemy as sa
from test_after_wait import consumer
from test_builtin_packers import facets, files

from dxts.core.catalogue import CatalogueFile, LocalFileCatalogue
from dxts.core.db import Database
from dxts.core.schema import execution
from dxts.core.states import InputStatus
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import run_packer

I = InputStatus  # noqa: E741


def file(lfn: str, kind: str, *parents: str) -> CatalogueFile:
    metadata: dict[str, Any] = {"file_type": kind, "run": 7}
    if parents:
        metadata["ancestors"] = list(parents)
    return CatalogueFile(lfn=lfn, size=10, metadata=metadata)


async def lineage(catalogue: LocalFileCatalogue, prefix: str) -> None:
    """raw0, raw1 → rdst0 (from both), raw2 → rdst1; rdst0 → dst0; rdst1 → dst1; dst2 names a
    parent the catalogue does not hold."""
    p = f"/lhcb/{prefix}"
    await catalogue.register([file(f"{p}/raw{n}", "RAW") for n in range(3)])
    await catalogue.register(
        [
            file(f"{p}/rdst0", "RDST", f"{p}/raw0", f"{p}/raw1"),
            file(f"{p}/rdst1", "RDST", f"{p}/raw2"),
        ]
    )
    await catalogue.register(
        [
            file(f"{p}/dst0", "DST", f"{p}/rdst0"),
            file(f"{p}/dst1", "DST", f"{p}/rdst1"),
            file(f"{p}/dst2", "DST", f"{p}/lost"),
        ]
    )


async def test_lhcb_ancestors_feeds_each_file_with_its_raw_ancestors(
    database: Database, plugins: Any, catalogue: LocalFileCatalogue
) -> None:
    await lineage(catalogue, "anc-feed")
    args = {"conditions": {"file_type": "DST"}, "page_size": 2}
    t = await s.transformation(database, feeder="LHCbAncestors", feeder_args=args)
    result = await run_feeder(database, plugins, t)
    assert result.error is None and result.inserted >= 3
    p = "/lhcb/anc-feed"
    fed = {r.LFN: r.Descriptor for r in await s.input_rows(database, t.id) if p in r.LFN}
    assert fed == {
        f"{p}/dst0": {"run": 7, "ancestors": [f"{p}/raw0", f"{p}/raw1"]},
        f"{p}/dst1": {"run": 7, "ancestors": [f"{p}/raw2"]},
        f"{p}/dst2": {"run": 7, "ancestors": [], "missing_ancestors": [f"{p}/lost"]},
    }
    # One generation up: the RDST parents instead.
    near = await s.transformation(
        database, feeder="LHCbAncestors", feeder_args={**args, "depth": 1}
    )
    await run_feeder(database, plugins, near)
    rows = {r.LFN: r.Descriptor for r in await s.input_rows(database, near.id)}
    assert rows[f"{p}/dst0"]["ancestors"] == [f"{p}/rdst0"]
    await s.assert_counters_exact(database, t.id)


async def test_ancestor_lookup_packs_files_with_their_ancestors(
    database: Database, plugins: Any, catalogue: LocalFileCatalogue
) -> None:
    await lineage(catalogue, "anc-pack")
    p = "/lhcb/anc-pack"
    # Fed without ancestors (a plain List): the packer looks them up itself.
    pool = files([(f"{p}/dst{n}", 10, None) for n in range(3)] + [(f"{p}/nowhere", 1, None)])
    t = await s.transformation(
        database,
        packer="AncestorLookup",
        packer_args={"ancestor_input": "raw", "group_size": 2},
        annotations={"driving_input": "dst"},
    )
    await run_feeder(database, plugins, replace(t, feeder_args=pool))
    result = await run_packer(database, plugins, replace(t, feeder_enabled=False))
    assert (result.parcels, result.problematic) == (1, 2)
    (parcel,) = await facets(database, t.id)
    assert parcel.Parameters == {
        "dst": [
            {"class": "File", "location": f"lfn:{p}/dst0", "size": 10},
            {"class": "File", "location": f"lfn:{p}/dst1", "size": 10},
        ],
        "raw": [{"class": "File", "location": f"lfn:{p}/raw{n}"} for n in range(3)],
    }
    reasons = {
        r.Message for r in await s.log_rows(database, t.id) if r.EventType == "InputProblematic"
    }
    assert reasons == {
        f"ancestors not in the catalogue: {p}/lost",
        f"ancestors not in the catalogue: {p}/nowhere itself",
    }
    await s.assert_counters_exact(database, t.id)


async def test_ancestor_lookup_waits_after_the_staging_of_the_ancestors(
    database: Database, plugins: Any, catalogue: LocalFileCatalogue
) -> None:
    """`after` a staging member fed the raw files (never the reconstructed ones): a file waits
    until the staging has processed its ancestors, and is set aside when it gave up on one."""
    await lineage(catalogue, "anc-after")
    p = "/lhcb/anc-after"
    staging = await consumer(
        database,
        plugins,
        {f"{p}/raw0": I.PROCESSED, f"{p}/raw1": I.ASSIGNED, f"{p}/raw2": I.NOT_PROCESSED},
    )
    pool = files([(f"{p}/dst{n}", 10, None) for n in range(2)])
    t = await s.transformation(
        database,
        packer="AncestorLookup",
        packer_args={"ancestor_input": "raw", "after_delay_s": 0.01},
        annotations={"driving_input": "dst", "after": [str(UUID(bytes=staging.id))]},
    )
    await run_feeder(database, plugins, replace(t, feeder_args=pool))
    result = await run_packer(database, plugins, replace(t, feeder_enabled=False))
    assert (result.parcels, result.delayed, result.problematic) == (0, 1, 1)
    rows = {r.LFN: r.Status for r in await s.input_rows(database, t.id)}
    assert rows == {f"{p}/dst0": "Unassigned", f"{p}/dst1": "Problematic"}
    reasons = {
        r.Message for r in await s.log_rows(database, t.id) if r.EventType == "InputProblematic"
    }
    assert reasons == {f"{p}/raw2: consumer {UUID(bytes=staging.id)} gave up on it (NotProcessed)"}
    # Staged (raw1 processed too), the waiting file is packed with both its ancestors.
    await settle(database, staging.id, f"{p}/raw1")
    await asyncio.sleep(0.05)
    result = await run_packer(database, plugins, replace(t, feeder_enabled=False))
    assert result.parcels == 1
    (parcel,) = await facets(database, t.id)
    assert parcel.Parameters["raw"] == [
        {"class": "File", "location": f"lfn:{p}/raw{n}"} for n in range(2)
    ]
    await s.assert_counters_exact(database, t.id)


async def settle(database: Database, transformation_id: bytes, lfn: str) -> None:
    """The staging processes `lfn` (its statuses set as `consumer` sets them)."""
    inputs = execution.inputs
    async with database.transaction(s.RC) as conn:
        await conn.execute(
            sa.update(inputs)
            .where(inputs.c.TransformationID == transformation_id, lfn == inputs.c.LFN)
            .values(Status=I.PROCESSED.value)
        )
