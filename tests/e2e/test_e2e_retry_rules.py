"""Retry rules end to end (both databases): RetryByRules reads each failed parcel's raw status
and message as the backend reported them. An input that runs out of memory is packed again
asking for twice the memory, twice, and succeeds once it asks for enough; an input whose file
does not exist is written off at once, after one parcel. The same rules in log-only mode change
nothing but the log: the fates, error counts, parcels and requirements are those of plain
RetryUntilMaxErrors, and the log says what each rule would have done. With a second compute
backend, an input that fails on the first for the site's own reason is retried on the other,
and succeeds there."""

from __future__ import annotations

from collections import Counter
from typing import Any

import sqlalchemy as sa
from e2e_world import Launch, Submitted, World, check_invariants, listed, step, workgraph

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.core.db import Isolation
from dxts.core.schema import definition, execution

OOM, MISSING = "/1.raw", "/2.raw"  # of every workgraph below, whatever its prefix
RULES = [
    {
        "name": "oom",
        "match": {"raw_status": "OUT_OF_MEMORY", "exit_code": 137},
        "action": "raise",
        "raise": {"memory_mb": {"factor": 2, "max": 16000, "start": 1000}},
    },
    {"name": "missing", "match": {"message": "(?i)no such file"}, "action": "give_up"},
]


def document(prefix: str, hook: dict[str, Any]) -> dict[str, Any]:
    return workgraph(
        {"raw": listed(4, prefix)},
        {"Sim": step("raw", hooks={"HandleFailedInput": hook})},
        {"sims": "Sim/out"},
    )


def null_settings() -> NullSettings:
    return NullSettings(
        name="null",
        outputs=["out"],
        rules=[
            NullRule(
                fate="failure",
                lfn=OOM,
                backend_status="OUT_OF_MEMORY",
                message="the job was killed: out of memory",
                exit_code=137,
                while_below={"memory_mb": 4000},
            ),
            NullRule(
                fate="failure",
                lfn=MISSING,
                backend_status="FAILED",
                message="open /data/calib.db: No such file or directory",
                exit_code=2,
            ),
        ],
    )


async def asked_memory(world: World, wg: Submitted, lfn_end: str) -> list[Any]:
    """The memory_mb each parcel of the input ending in `lfn_end` asked for, in parcel order."""
    i, pi, cp = execution.inputs.c, execution.parcel_inputs.c, execution.compute_parcels.c
    r = definition.requirements.c
    async with world.database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = await conn.execute(
            sa.select(r.Requirements)
            .select_from(
                execution.inputs.join(
                    execution.parcel_inputs,
                    (pi.TransformationID == i.TransformationID) & (pi.InputID == i.InputID),
                )
                .join(execution.compute_parcels, cp.ParcelID == pi.ParcelID)
                .outerjoin(definition.requirements, r.RequirementsID == cp.RequirementsID)
            )
            .where(i.TransformationID == wg.tid("Sim"), i.LFN.like(f"%{lfn_end}"))
            .order_by(pi.ParcelID)
        )
        return [(requirements or {}).get("memory_mb") for (requirements,) in rows]


async def fates(world: World, wg: Submitted) -> dict[str, tuple[str, int]]:
    """Per input (by the end of its LFN): its status and ErrorCount."""
    return {
        "/" + str(row.LFN).rsplit("/", 1)[1]: (row.Status, row.ErrorCount)
        for row in await world.inputs(wg, "Sim")
    }


async def decided(world: World, wg: Submitted) -> list[tuple[str, str]]:
    """The (decision, note) of each FailedInputDecided row."""
    _, logs = await world.logs(wg)
    return [
        (row.Data["decision"], row.Message)
        for row in logs.get("Sim", [])
        if row.EventType == "FailedInputDecided"
    ]


def settled(world: World, wg: Submitted, expected: Counter[str]) -> Any:
    async def check() -> bool:
        return (await world.census(wg))["Sim"]["inputs"] == expected

    return check


async def test_out_of_memory_is_retried_with_more_and_a_missing_file_written_off(
    launch: Launch,
) -> None:
    async with launch(null=null_settings()) as world:
        wg = await world.submit(
            document("a", {"hook": "RetryByRules", "args": {"rules": RULES, "max_errors": 5}})
        )
        await world.start(wg)
        await world.reach(wg, "Completed")
        await check_invariants(world, wg)
        assert await fates(world, wg) == {
            "/0.raw": ("Processed", 0),
            OOM: ("Processed", 2),  # 1000 → 2000 (out of memory), → 4000: enough
            MISSING: ("NotProcessed", 1),  # written off after its first parcel
            "/3.raw": ("Processed", 0),
        }
        assert await asked_memory(world, wg, OOM) == [None, 2000, 4000]
        assert await asked_memory(world, wg, MISSING) == [None]
        assert sorted(await decided(world, wg)) == sorted(
            [
                ("RetryWith", "rule oom: retried with memory_mb unset → 2000"),
                ("WriteOff", "rule missing: written off"),
                ("RetryWith", "rule oom: retried with memory_mb 2000 → 4000"),
            ]
        )
        _, logs = await world.logs(wg)
        written_off = [r.Message for r in logs["Sim"] if r.EventType == "InputWrittenOff"]
        assert written_off == [
            "rule missing: null FAILED exit code 2: open /data/calib.db: No such file or directory"
        ]
        parcels = await world.parcels(wg, "Sim")
        assert Counter(p.Status for p in parcels) == {"Done": 3, "Failed": 3}


async def test_a_failure_of_the_site_is_retried_on_the_other_backend(launch: Launch) -> None:
    broken_site = NullSettings(
        name="null",
        outputs=["out"],
        rules=[
            NullRule(
                fate="failure",
                lfn=OOM,
                backend_status="FAILED",
                message="cannot write to /scratch: no space left on device",
                exit_code=1,
            )
        ],
    )
    elsewhere = [
        {
            "name": "full-scratch",
            "match": {"backend": "null", "message": "no space left"},
            "action": "elsewhere",
            "backend": "null-b",
        }
    ]
    other = NullSettings(name="null-b", outputs=["out"])
    async with launch(null=broken_site, more_null=[other]) as world:
        wg = await world.submit(
            document("d", {"hook": "RetryByRules", "args": {"rules": elsewhere}})
        )
        await world.start(wg)
        await world.reach(wg, "Completed")
        await check_invariants(world, wg)
        assert await fates(world, wg) == {
            "/0.raw": ("Processed", 0),
            OOM: ("Processed", 1),  # failed on null, then done on null-b
            MISSING: ("Processed", 0),
            "/3.raw": ("Processed", 0),
        }
        assert await decided(world, wg) == [("RetryWith", "rule full-scratch: retried on null-b")]
        parcels = await world.parcels(wg, "Sim")
        assert Counter((p.Backend, p.Status) for p in parcels) == {
            ("null", "Done"): 3,
            ("null", "Failed"): 1,
            ("null-b", "Done"): 1,
        }
        assert (await world.backend_counters("null-b"))["accepted"] == 1


async def test_log_only_changes_nothing_but_the_log(launch: Launch) -> None:
    async with launch(null=null_settings()) as world:
        dry = await world.submit(
            document(
                "b",
                {
                    "hook": "RetryByRules",
                    "args": {"rules": RULES, "mode": "log_only", "max_errors": 2},
                },
            )
        )
        plain = await world.submit(
            document("c", {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 2}})
        )
        await world.start(dry)
        await world.start(plain)
        expected = Counter({"Processed": 2, "Problematic": 2})
        await world.until("the dry run settled", settled(world, dry, expected), dry)
        await world.until("the plain run settled", settled(world, plain, expected), plain)
        # The same fates, error counts and parcels as without rules; nothing raised.
        assert (
            await fates(world, dry)
            == await fates(world, plain)
            == {
                "/0.raw": ("Processed", 0),
                OOM: ("Problematic", 2),
                MISSING: ("Problematic", 2),
                "/3.raw": ("Processed", 0),
            }
        )
        for wg in (dry, plain):
            assert await asked_memory(world, wg, OOM) == [None, None]
            parcels = await world.parcels(wg, "Sim")
            assert Counter(p.Status for p in parcels) == {"Done": 2, "Failed": 4}
            assert not any("retry_with" in (p.Annotations or {}) for p in parcels)
        # Only the log differs: what each rule would have done.
        limit = "set aside, failed in 2 parcels (limit 2)"
        assert sorted(await decided(world, dry)) == sorted(
            [
                ("ToUnassigned", "log only: rule oom would have retried with memory_mb unset → "
                 "2000 (as without rules: retried)"),
                ("ToProblematic", f"log only: rule oom would have {limit} (as without rules: "
                 f"{limit})"),
                ("ToUnassigned", "log only: rule missing would have written off (as without "
                 "rules: retried)"),
                ("ToProblematic", "log only: rule missing would have written off (as without "
                 f"rules: {limit})"),
            ]
        )  # fmt: skip
        assert await decided(world, plain) == []
