"""What the dispatcher tests share: seeded parcels, doubles for definition and execution, real
adaptor servers over gRPC, and the exact-counter check.

* Parcels are created as execution creates them: rows and creation journals in one transaction.
* `FakeDefinition` serves process trees from the Processes table and a fixed scope, counting
  calls; `FakeExecution` is the outcome sink, recording what it was given and, when asked to,
  applying execution's transitions (Assigned → Completing / Failed, Completing → Cancelled,
  Reserved → Failed for a whole Submit refused) with their journals, so that a recorded
  parcel leaves the poll, as with the real service.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from dxts.backends.edge.servicer import adaptor_service
from dxts.backends.logic.adaptor import Adaptor
from dxts.core import content_store
from dxts.core.adaptor.model import Outcome, OutcomeAck, OutcomeDisposition, OutcomeResult
from dxts.core.counters import (
    DATA_PARCELS,
    TRANSFORMATION,
    StorageDelta,
    journal_data_parcels,
    journal_inputs,
    journal_parcels,
)
from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import Unavailable
from dxts.core.grpc import DevKeys, GrpcServer
from dxts.core.ids import canonical_json, id_from_str, input_hash, new_id, new_ids
from dxts.core.kernel.authorisation import CallerKind, adaptor_subject
from dxts.core.schema import definition, execution, metadata
from dxts.core.settings import ServerSettings
from dxts.core.states import Kind
from dxts.dispatcher.component import DispatcherComponent, build_dispatcher
from dxts.dispatcher.settings import DispatcherSettings

RC = Isolation.READ_COMMITTED
SEED_BATCH = 5_000
TOOL = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": "true",
    "inputs": {},
    "outputs": {},
}
SCOPE = ("lhcb", "MCSimulation")


class Keys:
    """The development key pair the test servers verify and the test clients sign with."""

    def __init__(self, directory: Path) -> None:
        self.keys = DevKeys.load_or_create(directory)
        self.token = self.keys.issue("dxts", "dxts-dispatcher", [CallerKind.DISPATCHER])
        self.service_token = self.keys.issue("dxts", "dxts-services", [CallerKind.SERVICE])

    def adaptor_token(self, backend: str) -> str:
        """What the adaptor serving `backend` pushes its outcomes with."""
        return self.keys.issue("dxts", adaptor_subject(backend), [CallerKind.ADAPTOR])


async def serve(
    adaptor: Adaptor,
    keys: Keys,
    listen: str = "127.0.0.1:0",
) -> GrpcServer:
    server = GrpcServer(
        [adaptor_service(adaptor)],
        settings=ServerSettings(listen=listen),
        verifier=keys.keys.verifier(),
    )
    await server.start()
    return server


async def empty(database: Database) -> None:
    """Every table emptied (children first): each test starts from nothing."""
    async with database.transaction(RC) as conn:
        for table in reversed(metadata.sorted_tables):
            await conn.execute(table.delete())


async def transformation(
    database: Database, kind: Kind = Kind.COMPUTE, *, vo: str = "lhcb"
) -> bytes:
    ownership_id, transformation_id = new_id(), new_id()

    async def work(conn: Any) -> None:
        await conn.execute(
            sa.insert(definition.ownership).values(OwnershipID=ownership_id, VO=vo, Sub="me")
        )
        await conn.execute(
            sa.insert(definition.transformations).values(
                TransformationID=transformation_id,
                OwnershipID=ownership_id,
                Type="Test",
                Kind=kind.value,
                Status="Active",
                Packer="test",
                UpdatedAt=await db_now(conn),
            )
        )

    await database.run(work, isolation=RC)
    return transformation_id


async def parcels(
    database: Database,
    count: int,
    *,
    transformation_id: bytes | None = None,
    kind: Kind = Kind.COMPUTE,
    backend: str | None = None,
    process: dict[str, Any] | None = None,
    parameters: Any = None,
    inputs_per_parcel: int = 0,
    request: Any = None,
    deltas: Sequence[tuple[str, StorageDelta]] = (),
    vo: str = "lhcb",
) -> list[bytes]:
    """`count` Unassigned parcels, with their facet, inputs (Assigned, linked) and journals; a
    user parcel (UserParcels row) when `transformation_id` is None; directed to `backend` (a
    DirectedParcels row, as the packer writes it) when one is given."""
    ids = new_ids(count)
    tid = transformation_id
    for start in range(0, count, SEED_BATCH):
        chunk = ids[start : start + SEED_BATCH]

        async def work(conn: Any, chunk: list[bytes] = chunk) -> None:
            now = await db_now(conn)
            await conn.execute(
                sa.insert(execution.parcels),
                [
                    {
                        "ParcelID": p,
                        "TransformationID": tid,
                        "Kind": kind.value,
                        "Status": "Unassigned",
                        "UpdatedAt": now,
                    }
                    for p in chunk
                ],
            )
            if backend is not None:  # directed, as a packer directs a parcel
                await conn.execute(
                    sa.insert(execution.directed_parcels),
                    [{"ParcelID": p, "Backend": backend} for p in chunk],
                )
            if tid is None:
                await conn.execute(
                    sa.insert(execution.user_parcels),
                    [{"ParcelID": p, "VO": vo, "Sub": "user"} for p in chunk],
                )
            if kind is Kind.COMPUTE:
                (process_id,) = await content_store.put_processes(conn, [process or TOOL])
                await conn.execute(
                    sa.insert(execution.compute_parcels),
                    [
                        {
                            "ParcelID": p,
                            "ProcessID": process_id,
                            "Parameters": parameters if parameters is not None else {"n": i},
                        }
                        for i, p in enumerate(chunk)
                    ],
                )
            else:
                await conn.execute(
                    sa.insert(execution.data_parcels),
                    [{"ParcelID": p, "Request": request or {"Operations": []}} for p in chunk],
                )
                if deltas:
                    await conn.execute(
                        sa.insert(execution.data_parcel_deltas),
                        [
                            {
                                "ParcelID": p,
                                "StorageElement": se,
                                "FilesAdded": d.files_added,
                                "BytesAdded": d.bytes_added,
                                "FilesFreed": d.files_freed,
                                "BytesFreed": d.bytes_freed,
                            }
                            for p in chunk
                            for se, d in deltas
                        ],
                    )
            if tid is not None:
                await journal_parcels(conn, {(tid, None, "Unassigned"): len(chunk)})
                if deltas:
                    await journal_data_parcels(
                        conn,
                        [((tid, None, "Unassigned", se), d) for _ in chunk for se, d in deltas],
                    )
            if tid is not None and inputs_per_parcel:
                rows, links = [], []
                for p in chunk:
                    for input_id in new_ids(inputs_per_parcel):
                        lfn = f"/lhcb/in/{input_id.hex()}"
                        rows.append(
                            {
                                "TransformationID": tid,
                                "InputID": input_id,
                                "InputHash": input_hash(lfn, None),
                                "LFN": lfn,
                                "Status": "Assigned",
                                "LastParcelID": p,
                                "UpdatedAt": now,
                            }
                        )
                        links.append({"TransformationID": tid, "ParcelID": p, "InputID": input_id})
                await conn.execute(sa.insert(execution.inputs), rows)
                await conn.execute(sa.insert(execution.parcel_inputs), links)
                await journal_inputs(conn, {(tid, None, "Assigned"): len(rows)})

        await database.run(work, isolation=RC)
    return ids


async def statuses(database: Database, ids: Sequence[bytes]) -> dict[bytes, str]:
    async def work(conn: Any) -> dict[bytes, str]:
        rows = await conn.execute(
            sa.select(execution.parcels.c.ParcelID, execution.parcels.c.Status).where(
                execution.parcels.c.ParcelID.in_(list(ids))
            )
        )
        return {bytes(r[0]): r[1] for r in rows}

    return await database.run(work, isolation=RC)


async def parcel_rows(database: Database, ids: Sequence[bytes]) -> dict[bytes, Any]:
    async def work(conn: Any) -> dict[bytes, Any]:
        rows = await conn.execute(
            sa.select(execution.parcels).where(execution.parcels.c.ParcelID.in_(list(ids)))
        )
        return {bytes(r.ParcelID): r for r in rows}

    return await database.run(work, isolation=RC)


async def identifiers(database: Database, adaptor: str) -> dict[bytes, bytes]:
    """ParcelID → identifier of the parcels adaptors of type `adaptor` accepted."""
    table = execution.backend_ids

    async def work(conn: Any) -> dict[bytes, bytes]:
        rows = await conn.execute(
            sa.select(table.c.ParcelID, table.c.Identifier).where(table.c.Adaptor == adaptor)
        )
        return {bytes(r[0]): bytes(r[1]) for r in rows}

    return await database.run(work, isolation=RC)


async def assert_counters_exact(database: Database) -> None:
    """Every counter reading equals a plain recount of the rows it counts."""

    async def work(conn: Any) -> tuple[Any, ...]:
        parcels_t = execution.parcels
        recount = {
            (bytes(r[0]), "Parcel", r[1]): int(r[2])
            for r in await conn.execute(
                sa.select(parcels_t.c.TransformationID, parcels_t.c.Status, sa.func.count())
                .where(parcels_t.c.TransformationID.is_not(None))
                .group_by(parcels_t.c.TransformationID, parcels_t.c.Status)
            )
        }
        inputs_t = execution.inputs
        recount.update(
            {
                (bytes(r[0]), "Input", r[1]): int(r[2])
                for r in await conn.execute(
                    sa.select(
                        inputs_t.c.TransformationID, inputs_t.c.Status, sa.func.count()
                    ).group_by(inputs_t.c.TransformationID, inputs_t.c.Status)
                )
            }
        )
        deltas = execution.data_parcel_deltas
        data_recount = {
            (bytes(r[0]), r[1], r[2]): (int(r[3]), int(r[4]), int(r[5]), int(r[6]))
            for r in await conn.execute(
                sa.select(
                    parcels_t.c.TransformationID,
                    parcels_t.c.Status,
                    deltas.c.StorageElement,
                    sa.func.sum(deltas.c.FilesAdded),
                    sa.func.sum(deltas.c.BytesAdded),
                    sa.func.sum(deltas.c.FilesFreed),
                    sa.func.sum(deltas.c.BytesFreed),
                )
                .join(deltas, deltas.c.ParcelID == parcels_t.c.ParcelID)
                .where(parcels_t.c.TransformationID.is_not(None))
                .group_by(parcels_t.c.TransformationID, parcels_t.c.Status, deltas.c.StorageElement)
            )
        }
        return recount, data_recount, await TRANSFORMATION.read(conn), await DATA_PARCELS.read(conn)

    recount, data_recount, reading, data_reading = await database.run(
        work, isolation=Isolation.REPEATABLE_READ
    )
    assert {(bytes(k[0]), k[1], k[2]): v["Count"] for k, v in reading.items()} == recount
    assert {
        (bytes(k[0]), k[1], k[2]): (
            v["LFNCountAdded"],
            v["LFNSizeAdded"],
            v["LFNCountFreed"],
            v["LFNSizeFreed"],
        )
        for k, v in data_reading.items()
    } == data_recount


class FakeDefinition:
    """DefinitionSource double: trees from the Processes table (roots only), a fixed scope."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.tree_calls: Counter[bytes] = Counter()
        self.scope_calls: Counter[bytes] = Counter()

    async def process_tree(self, process_id: bytes) -> list[tuple[bytes, str]]:
        self.tree_calls[process_id] += 1

        async def work(conn: Any) -> Any:
            return await conn.scalar(
                sa.select(definition.processes.c.Process).where(
                    definition.processes.c.ProcessID == process_id
                )
            )

        body = await self.database.run(work, isolation=RC)
        return [(process_id, canonical_json(body).decode())]

    async def transformation_scope(self, transformation_id: bytes) -> tuple[str, str]:
        self.scope_calls[transformation_id] += 1
        return SCOPE


class FakeExecution:
    """OutcomeSink double; with `apply`, takes execution's transitions for what it records."""

    def __init__(self, database: Database | None = None) -> None:
        self.database = database
        self.outcomes: list[Outcome] = []
        self.unavailable = False

    def by_parcel(self) -> dict[bytes, list[Outcome]]:
        found: dict[bytes, list[Outcome]] = {}
        for outcome in self.outcomes:
            found.setdefault(id_from_str(outcome.parcel_id), []).append(outcome)
        return found

    async def record(self, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        if self.unavailable:
            raise Unavailable("execution is down (test)")
        self.outcomes.extend(outcomes)
        moved: set[bytes] = set()
        if self.database is not None:
            moved = await self.database.run(lambda conn: self._apply(conn, outcomes), isolation=RC)
        return [
            OutcomeAck(
                parcel_id=o.parcel_id,
                backend=o.backend,
                identifier=o.identifier,
                disposition=OutcomeDisposition.RECORDED
                if id_from_str(o.parcel_id) in moved or self.database is None
                else OutcomeDisposition.ALREADY_RECORDED,
            )
            for o in outcomes
        ]

    async def _apply(self, conn: Any, outcomes: Sequence[Outcome]) -> set[bytes]:
        parcels_t = execution.parcels
        moved: set[bytes] = set()
        for outcome in outcomes:
            parcel_id = id_from_str(outcome.parcel_id)
            row = (
                await conn.execute(
                    sa.select(parcels_t.c.TransformationID, parcels_t.c.Status)
                    .where(parcels_t.c.ParcelID == parcel_id)
                    .with_for_update()
                )
            ).one()
            source = row.Status
            refused = outcome.failure is not None and outcome.failure.failure_class == "refused"
            failed = outcome.result is OutcomeResult.FAILED
            if failed and (source == "Assigned" or (source == "Reserved" and refused)):
                target = "Failed"
            elif source == "Assigned":
                target = "Completing"
            elif source == "Completing" and outcome.result is OutcomeResult.CANCELLED:
                target = "Cancelled"
            else:
                continue
            await conn.execute(
                sa.update(parcels_t)
                .where(parcels_t.c.ParcelID == parcel_id)
                .values(Status=target, UpdatedAt=await db_now(conn))
            )
            if row.TransformationID is not None:
                await journal_parcels(conn, {(bytes(row.TransformationID), source, target): 1})
            moved.add(parcel_id)
        return moved


async def request_cancel(database: Database, parcel_ids: Sequence[bytes]) -> list[bytes]:
    """What execution's CancelParcels does to a Reserved or Assigned parcel: → Completing with
    the cancel request; returns the parcels it moved."""
    parcels_t = execution.parcels

    async def work(conn: Any) -> list[bytes]:
        rows = (
            await conn.execute(
                sa.select(parcels_t.c.ParcelID, parcels_t.c.TransformationID, parcels_t.c.Status)
                .where(
                    parcels_t.c.ParcelID.in_(list(parcel_ids)),
                    parcels_t.c.Status.in_(["Reserved", "Assigned"]),
                )
                .with_for_update()
            )
        ).all()
        now = await db_now(conn)
        for row in rows:
            await conn.execute(
                sa.update(parcels_t)
                .where(parcels_t.c.ParcelID == row.ParcelID)
                .values(Status="Completing", Annotations={"cancel_requested": True}, UpdatedAt=now)
            )
            if row.TransformationID is not None:
                await journal_parcels(
                    conn, {(bytes(row.TransformationID), row.Status, "Completing"): 1}
                )
        return [bytes(r.ParcelID) for r in rows]

    return await database.run(work, isolation=RC)


async def dispatcher(
    database: Database,
    backends: Sequence[dict[str, Any]],
    keys: Keys,
    *,
    definition: Any = None,
    sink: Any = None,
    **tunables: Any,
) -> DispatcherComponent:
    """A dispatcher over `database` with no sweeps running (the tests drive it)."""
    settings = DispatcherSettings(backends=list(backends), **tunables)
    component = await build_dispatcher(
        database,
        settings=settings,
        definition=definition or FakeDefinition(database),
        sink=sink or FakeExecution(database),
        token=keys.token,
        start_sweeps=False,
    )
    await component.refresh()
    return component
