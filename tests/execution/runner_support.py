"""Rows and registries for the feeder, packer, built-in and gRPC tests (execution, part 1).

`transformation()` creates what the definition service would have created (Ownership,
Transformations, and for a compute transformation its process, requirements template and
ComputeTransformations row) and returns the record the definition client would list.
`recount()` counts inputs and parcels by status with plain SQL, independently of the counter
declarations, so every test can compare the exact counters with it.
"""

from __future__ import annotations

import asyncio
import collections
import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core import content_store
from dxts.core.counters import DATA_PARCELS, TRANSFORMATION, ensure_lock_rows
from dxts.core.db import Database, Isolation, db_now
from dxts.core.ids import new_id, new_ids
from dxts.core.plugins import PluginKind, Providers, Registry
from dxts.core.plugins.registry import analyse
from dxts.core.schema import accounting, definition, execution, metadata
from dxts.core.states import Kind
from dxts.execution.logic.transformations import ActiveTransformation, Output

RC = Isolation.READ_COMMITTED
PROCESS = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": "true",
    "inputs": {"input-data": {"type": {"type": "array", "items": ["File", "string"]}}},
    "outputs": {},
}
TEMPLATE = {"memory_mb": 2000, "sites": ["CERN"]}


async def empty(database: Database) -> None:
    """Every table emptied, children first (the counter lock rows put back)."""
    async with database.transaction(RC) as conn:
        for table in reversed(metadata.sorted_tables):
            await conn.execute(table.delete())
        await ensure_lock_rows(conn)


async def transformation(
    database: Database,
    *,
    kind: Kind = Kind.COMPUTE,
    feeder: str | None = "List",
    feeder_args: dict[str, Any] | None = None,
    packer: str = "PerInput",
    packer_args: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
    outputs: Sequence[str] = (),
    template: dict[str, Any] | None = TEMPLATE,
    vo: str = "lhcb",
    sub: str = "alice",
    **record: Any,
) -> ActiveTransformation:
    """An Active transformation as definition would have stored it, and its listed record."""
    ownership_id, tid = new_id(), new_id()
    output_ids = dict(zip(outputs, new_ids(len(outputs)), strict=True))
    process_id: bytes | None = None

    async def work(conn: AsyncConnection) -> None:
        nonlocal process_id
        await ensure_lock_rows(conn)
        now = await db_now(conn)
        await conn.execute(
            sa.insert(definition.ownership).values(OwnershipID=ownership_id, VO=vo, Sub=sub)
        )
        await conn.execute(
            sa.insert(definition.transformations).values(
                TransformationID=tid,
                OwnershipID=ownership_id,
                Type="Test",
                Kind=kind.value,
                Status="Active",
                Feeder=feeder,
                FeederArgs=feeder_args,
                Packer=packer,
                PackerArgs=packer_args,
                Annotations=annotations,
                UpdatedAt=now,
            )
        )
        if kind is Kind.COMPUTE:
            (process_id,) = await content_store.put_processes(conn, [PROCESS])
            template_ids = await content_store.put_requirements(
                conn, [template] if template else []
            )
            await conn.execute(
                sa.insert(definition.compute_transformations).values(
                    TransformationID=tid,
                    ProcessID=process_id,
                    RequirementsTemplateID=template_ids[0] if template_ids else None,
                )
            )
        if output_ids:
            await conn.execute(
                sa.insert(definition.transformation_outputs),
                [
                    {
                        "TransformationOutputID": oid,
                        "TransformationID": tid,
                        "Name": name,
                        "Intermediate": False,
                    }
                    for name, oid in output_ids.items()
                ],
            )

    await database.run(work, isolation=RC)
    return ActiveTransformation(
        id=tid,
        type="Test",
        kind=kind,
        packer=packer,
        vo=vo,
        owner_sub=sub,
        feeder=feeder,
        feeder_args=feeder_args or {},
        packer_args=packer_args or {},
        annotations=annotations or {},
        process_id=process_id,
        requirements_template=template if kind is Kind.COMPUTE else None,
        outputs=tuple(Output(oid, name) for name, oid in output_ids.items()),
        **record,
    )


async def recount(database: Database, transformation_id: bytes) -> dict[tuple[str, str], int]:
    """(Entity, Status) → rows, by plain COUNT(*)."""
    inputs, parcels = execution.inputs, execution.parcels
    async with database.transaction(RC) as conn:
        found: dict[tuple[str, str], int] = {}
        for entity, table in (("Input", inputs), ("Parcel", parcels)):
            rows = await conn.execute(
                sa.select(table.c.Status, sa.func.count())
                .where(table.c.TransformationID == transformation_id)
                .group_by(table.c.Status)
            )
            found.update({(entity, status): int(n) for status, n in rows})
    return found


async def counted(database: Database, transformation_id: bytes) -> dict[tuple[str, str], int]:
    """(Entity, Status) → the exact counter's value (zeros left out)."""
    async with database.transaction(RC) as conn:
        reading = await TRANSFORMATION.read(conn, {"TransformationID": transformation_id})
    return {(key[1], key[2]): v["Count"] for key, v in reading.items() if v["Count"]}


async def assert_counters_exact(database: Database, transformation_id: bytes) -> None:
    assert await counted(database, transformation_id) == await recount(database, transformation_id)


async def data_counted(database: Database, transformation_id: bytes) -> dict[tuple[str, str], Any]:
    async with database.transaction(RC) as conn:
        reading = await DATA_PARCELS.read(conn, {"TransformationID": transformation_id})
    return {(key[1], key[2]): values for key, values in reading.items()}


async def input_rows(database: Database, transformation_id: bytes) -> list[Any]:
    inputs = execution.inputs
    async with database.transaction(RC) as conn:
        return list(
            await conn.execute(
                sa.select(inputs)
                .where(inputs.c.TransformationID == transformation_id)
                .order_by(inputs.c.InputID)
            )
        )


async def transformation_row(database: Database, transformation_id: bytes) -> Any:
    table = definition.transformations
    async with database.transaction(RC) as conn:
        return (
            await conn.execute(
                sa.select(table).where(table.c.TransformationID == transformation_id)
            )
        ).one()


class FeederRow(NamedTuple):
    bookmark: Any
    exhausted: bool


async def feeder_row(database: Database, transformation_id: bytes) -> FeederRow:
    """The feeder's own row (FeederStates): its bookmark and whether it is exhausted."""
    table = execution.feeder_states
    async with database.transaction(RC) as conn:
        row = (
            await conn.execute(
                sa.select(table.c.Bookmark, table.c.Exhausted).where(
                    table.c.TransformationID == transformation_id
                )
            )
        ).first()
    return FeederRow(None, False) if row is None else FeederRow(row.Bookmark, bool(row.Exhausted))


async def set_bookmark(database: Database, transformation_id: bytes, bookmark: Any) -> None:
    """A bookmark an earlier invocation committed."""
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.insert(execution.feeder_states).values(
                TransformationID=transformation_id,
                Bookmark=bookmark,
                UpdatedAt=await db_now(conn),
            )
        )


async def log_rows(database: Database, transformation_id: bytes) -> list[Any]:
    table = accounting.transformation_log
    async with database.transaction(RC) as conn:
        return list(
            await conn.execute(
                sa.select(table)
                .where(table.c.TransformationID == transformation_id)
                .order_by(table.c.LogID)
            )
        )


def builtins(providers: Providers | None = None) -> Registry:
    """dxts's own plugins, found through dxts's entry points exactly as a service finds them."""
    points = [
        ep
        for ep in importlib.metadata.distribution("dxts").entry_points
        if ep.group in ("dxts.feeders", "dxts.packers")
    ]
    return Registry.discover(entry_points=points, providers=providers)


def registry(
    plugins: Mapping[str, Mapping[str, Callable[..., Any]]],
    *,
    providers: Providers | None = None,
    with_builtins: bool = True,
) -> Registry:
    """The built-ins plus the given test plugins (kind → name → function)."""
    found = list(builtins().__iter__()) if with_builtins else []
    for kind, named in plugins.items():
        for name, function in named.items():
            plugin, problems = analyse(PluginKind(kind), name, function, f"(test {name})")
            assert plugin is not None, problems
            found.append(plugin)
    return Registry(found, providers=providers)


def by_status(rows: Sequence[Any]) -> dict[str, int]:
    return dict(collections.Counter(row.Status for row in rows))


async def disable_feeder(database: Database, transformation_id: bytes) -> None:
    """What an operator's SetFeeder(enabled=false) does on the definition side."""
    table = definition.transformations
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.update(table)
            .where(table.c.TransformationID == transformation_id)
            .values(FeederEnabled=False)
        )


async def waiting_on_a_lock(database: Database) -> bool:
    """True once a connection to this test's database waits for a row lock (polled)."""
    for _ in range(100):
        # Polled gently: back-to-back information_schema reads were seen to hold the other
        # statement back from reaching its lock wait at all.
        await asyncio.sleep(0.1)
        async with database.transaction(RC) as conn:
            ours = set(
                (
                    await conn.execute(
                        sa.text(
                            "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE()"
                        )
                    )
                ).scalars()
            )
            waiting = set(
                (
                    await conn.execute(
                        sa.text(
                            "SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX "
                            "WHERE trx_state = 'LOCK WAIT'"
                        )
                    )
                ).scalars()
            )
        if ours & waiting:
            return True
    return False
