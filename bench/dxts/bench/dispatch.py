"""`dispatch`: Unassigned → Assigned through the dispatcher and a backend adaptor over gRPC.

One figure per replica count, `dispatch_parcels_per_s`: a round seeds `parcels` Unassigned
compute parcels (untimed), then that many dispatcher replicas (each its own Database, so its own
connections, running `claimers` claim loops as concurrent tasks in this process) claim, build
the payload, submit to the null adaptor (a separate `dxts.backends.null` process reached over
gRPC, so that its CPU is not this process's) and record identifiers until nothing is left; the
round fails unless every parcel ended Assigned with exactly one identifier. The baseline is the
raw SKIP LOCKED claim measured in the same run on the same rows: as many connections as
replicas, the same batch, `SELECT ... FOR UPDATE SKIP LOCKED` + `UPDATE` and nothing else, so
the ratio is what submitting and recording cost over claiming alone.

`pipeline_parcels_per_s`, at the largest replica count: Unassigned → Completing, i.e. the same
dispatch with the null adaptor finishing every parcel at once, the replicas' poll sweeps running
alongside (one at a time per backend, through the named lock) and forwarding the outcomes to
execution's `record_outcome_messages` (called in this process: execution's gRPC servicer is not
assembled yet), which takes each parcel Assigned → Completing with its outcome stored. Same
baseline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from dxts.bench.harness import Bench, Operation
from dxts.bench.processes import CpuSpent, cpu_of, local_mariadbd_pid
from dxts.bench.seeding import TRIVIAL_TOOL, insert_transformations
from dxts.core import content_store
from dxts.core.adaptor.mapping import ack_from_proto, outcome_to_proto
from dxts.core.adaptor.model import Outcome, OutcomeAck
from dxts.core.counters import TRANSFORMATION, journal_parcels
from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import FailedPrecondition, Unavailable
from dxts.core.grpc import DevKeys, channel
from dxts.core.grpc.ports import free_port
from dxts.core.ids import canonical_json, new_ids
from dxts.core.kernel.authorisation import CallerKind
from dxts.core.schema import definition, execution
from dxts.core.states import Kind, ParcelStatus
from dxts.dispatcher.component import DispatcherComponent, build_dispatcher
from dxts.dispatcher.settings import DispatcherSettings
from dxts.execution.edge.servicer_operations import record_outcome_messages
from dxts.v1 import backend_pb2, backend_pb2_grpc

RC = Isolation.READ_COMMITTED
SEED_BATCH = 5_000
PURGE_POLLS = 30  # 0.1 s apart: how long a reseed waits for the server's purge at most
ADAPTOR_START_S = 90.0  # how long the null adaptor process may take to answer at start


@dataclass(frozen=True)
class DispatchParams:
    parcels: int
    claim_batch: int
    submit_batch: int
    claimers: int
    replicas: tuple[int, ...]
    rounds: int


SCALES = {
    "tiny": DispatchParams(200, 20, 20, 1, (1, 2), 1),
    "small": DispatchParams(5_000, 100, 100, 2, (1, 2, 4), 3),
    "full": DispatchParams(50_000, 100, 100, 2, (1, 2, 4), 5),
}


class _Definition:
    """The definition side, answered from the database (the benchmark has one process)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def process_tree(self, process_id: bytes) -> list[tuple[bytes, str]]:
        async def work(conn: Any) -> Any:
            return await conn.scalar(
                sa.select(definition.processes.c.Process).where(
                    definition.processes.c.ProcessID == process_id
                )
            )

        body = await self.database.run(work, isolation=RC)
        return [(process_id, canonical_json(body).decode())]

    async def transformation_scope(self, transformation_id: bytes) -> tuple[str, str]:
        return "bench", "Bench"


FIGURES = ("dispatch_parcels_per_s", "pipeline_parcels_per_s")


async def run(
    bench: Bench,
    params: DispatchParams,
    figures: Sequence[str] = FIGURES,
    *,
    pipeline_cpu: list[CpuSpent] | None = None,
) -> None:
    """Measure `figures` (both by default; the `e2e` benchmark takes the pipeline alone).

    `pipeline_cpu`, when given, receives what each of the pipeline's rounds cost (the warm-up
    round first): the CPU of this process, the null adaptor's and a local mariadbd's."""
    database = bench.database
    transformation_id, process_id = await _seed_transformation(database)
    url = database.url.render_as_string(hide_password=False)
    with tempfile.TemporaryDirectory(prefix="dxts-bench-dispatch-") as folder:
        async with _null_adaptor(Path(folder)) as (address, token, adaptor_pid):
            for replicas in params.replicas if "dispatch_parcels_per_s" in figures else ():
                async with _replicas(url, replicas, address, token, params) as components:
                    await bench.compare(
                        "dispatch_parcels_per_s",
                        unit="parcels/s",
                        baseline=_claim(database, replicas, transformation_id, process_id, params),
                        subject=_dispatch(
                            database, components, transformation_id, process_id, params
                        ),
                        rounds=params.rounds,
                        params=_described(params, replicas),
                    )
            if "pipeline_parcels_per_s" not in figures:
                return
            replicas = max(params.replicas)
            async with _replicas(url, replicas, address, token, params) as components:
                await bench.compare(
                    "pipeline_parcels_per_s",
                    unit="parcels/s",
                    baseline=_claim(database, replicas, transformation_id, process_id, params),
                    subject=_pipeline(
                        database,
                        components,
                        transformation_id,
                        process_id,
                        params,
                        costs=pipeline_cpu,
                        pids=_working(database, adaptor_pid),
                    ),
                    rounds=params.rounds,
                    params={
                        **_described(params, replicas),
                        "outcomes": "polled by one replica while all claim, recorded by "
                        "execution's record_outcome_messages in this process (no gRPC hop)",
                    },
                )


def _described(params: DispatchParams, replicas: int) -> dict[str, Any]:
    return {
        "replicas": replicas,
        "parcels": params.parcels,
        "claim_batch": params.claim_batch,
        "submit_batch": params.submit_batch,
        "claim_loops_per_replica": params.claimers,
        "replicas_run_as": "concurrent tasks in one process, one Database each",
        "adaptor": "null, a separate process, over gRPC",
        "baseline": f"SKIP LOCKED claim only, {replicas} connections, batch {params.claim_batch}",
    }


async def _seed_transformation(database: Database) -> tuple[bytes, bytes]:
    async def work(conn: Any) -> tuple[bytes, bytes]:
        (transformation_id,) = await insert_transformations(conn)
        (process_id,) = await content_store.put_processes(conn, [TRIVIAL_TOOL])
        return transformation_id, process_id

    return await database.run(work, isolation=RC)


async def _reseed(database: Database, transformation_id: bytes, process_id: bytes, n: int) -> None:
    """Empty the parcels (and what hangs off them) and create `n` Unassigned ones anew, then
    wait for the server to purge what was deleted and updated (`_purged`)."""

    async def clear(conn: Any) -> None:
        for table in (
            execution.backend_ids,
            execution.compute_parcels,
            execution.parcels,
            TRANSFORMATION.journal_table,
        ):
            await conn.execute(sa.delete(table))

    await database.run(clear, isolation=RC)
    ids = new_ids(n)
    for start in range(0, n, SEED_BATCH):
        chunk = ids[start : start + SEED_BATCH]

        async def work(conn: Any, chunk: list[bytes] = chunk) -> None:
            now = await db_now(conn)
            await conn.execute(
                sa.insert(execution.parcels),
                [
                    {
                        "ParcelID": p,
                        "TransformationID": transformation_id,
                        "Kind": Kind.COMPUTE.value,
                        "Status": ParcelStatus.UNASSIGNED.value,
                        "UpdatedAt": now,
                    }
                    for p in chunk
                ],
            )
            await conn.execute(
                sa.insert(execution.compute_parcels),
                [{"ParcelID": p, "ProcessID": process_id, "Parameters": {"n": 1}} for p in chunk],
            )
            created: dict[tuple[bytes, str | None, str | None], int] = {
                (transformation_id, None, "Unassigned"): len(chunk)
            }
            await journal_parcels(conn, created)

        await database.run(work, isolation=RC)
    await _purged(database)


async def _history_length(database: Database) -> int | None:
    """InnoDB's history list length: transactions whose undo the purge has yet to apply (None
    where there is no such thing)."""
    if database.is_sqlite:
        return None

    async def work(conn: Any) -> int | None:
        found = await conn.scalar(
            sa.text(
                "SELECT COUNT FROM information_schema.INNODB_METRICS "
                "WHERE NAME = 'trx_rseg_history_len'"
            )
        )
        return None if found is None else int(found)

    return await database.run(work, isolation=RC)


async def _purged(database: Database) -> None:
    """Wait, untimed, until the server has purged every transaction's undo (0.1 s steps, 3 s
    at most: other work on a shared server may keep the list from emptying). Purging 5,000
    deleted parcels takes the server up to about a second of CPU after they commit: without
    the wait it lands in the next timed round, more of it in a long one (a dispatch round) than
    in a short one (the raw claim)."""
    for _ in range(PURGE_POLLS):
        if not await _history_length(database):
            return
        await asyncio.sleep(0.1)


async def _assigned(database: Database) -> tuple[int, int]:
    async def work(conn: Any) -> tuple[int, int]:
        parcels = execution.parcels
        assigned = await conn.scalar(
            sa.select(sa.func.count()).where(parcels.c.Status == ParcelStatus.ASSIGNED.value)
        )
        recorded = await conn.scalar(sa.select(sa.func.count()).select_from(execution.backend_ids))
        return int(assigned or 0), int(recorded or 0)

    return await database.run(work, isolation=RC)


def _dispatch(
    database: Database,
    components: list[DispatcherComponent],
    transformation_id: bytes,
    process_id: bytes,
    params: DispatchParams,
) -> Operation:
    async def setup() -> None:
        await _reseed(database, transformation_id, process_id, params.parcels)

    async def loop(component: DispatcherComponent) -> int:
        total = 0
        # A claim finding nothing means the rest is locked by the other loops, who take it.
        while claimed := await component.dispatcher.dispatch_once(Kind.COMPUTE):
            total += claimed
        return total

    async def dispatch_all() -> int:
        counts = await asyncio.gather(
            *(loop(c) for c in components for _ in range(params.claimers))
        )
        assigned, recorded = await _assigned(database)
        if not sum(counts) == assigned == recorded == params.parcels:
            raise FailedPrecondition(
                f"claimed {sum(counts)}, Assigned {assigned}, identifiers {recorded} of "
                f"{params.parcels}: every parcel must be dispatched exactly once"
            )
        return params.parcels

    return Operation(dispatch_all, setup)


def _working(database: Database, adaptor_pid: int) -> list[int]:
    """The processes the pipeline's work runs in: this one (the dispatchers and the recording),
    the null adaptor, and the database server when it is this machine's."""
    server = local_mariadbd_pid(database)
    return [os.getpid(), adaptor_pid, *([server] if server is not None else [])]


def _pipeline(
    database: Database,
    components: list[DispatcherComponent],
    transformation_id: bytes,
    process_id: bytes,
    params: DispatchParams,
    *,
    costs: list[CpuSpent] | None = None,
    pids: Sequence[int] = (),
) -> Operation:
    """Unassigned → Completing: dispatched, finished at once by the null adaptor, polled and
    recorded by execution, with the sweeps running side by side as in a deployment. Each
    round's cost (the CPU of `pids`) is appended to `costs` when given."""

    async def setup() -> None:
        await _reseed(database, transformation_id, process_id, params.parcels)

    async def claim_loop(component: DispatcherComponent) -> None:
        while await component.dispatcher.dispatch_once(Kind.COMPUTE):
            pass

    async def poll_loop(component: DispatcherComponent, claiming: asyncio.Future[Any]) -> None:
        backend = component.backends["null"]
        while True:
            if not await component.forwarder.poll_once(backend):
                if claiming.done() and not await _in_flight(database):
                    return
                await asyncio.sleep(0.01)

    async def pipeline() -> int:
        cpu_before, started = cpu_of(pids), time.monotonic()
        claiming: asyncio.Future[Any] = asyncio.gather(
            *(claim_loop(c) for c in components for _ in range(params.claimers))
        )
        # One poller: in a deployment the named lock lets one replica poll a backend at a time,
        # and the others' attempts would only measure GET_LOCK on fresh connections.
        await asyncio.gather(claiming, poll_loop(components[0], claiming))
        completing = await _count(database, ParcelStatus.COMPLETING.value)
        if completing != params.parcels:
            raise FailedPrecondition(f"{completing} of {params.parcels} parcels reached Completing")
        if costs is not None:
            spent = cpu_of(pids) - cpu_before
            costs.append(CpuSpent(spent, time.monotonic() - started, params.parcels))
        return params.parcels

    return Operation(pipeline, setup)


async def _in_flight(database: Database) -> int:
    return sum(
        [
            await _count(database, status)
            for status in ("Unassigned", "Reserved", ParcelStatus.ASSIGNED.value)
        ]
    )


async def _count(database: Database, status: str) -> int:
    async def work(conn: Any) -> int:
        parcels = execution.parcels
        return int(
            await conn.scalar(sa.select(sa.func.count()).where(parcels.c.Status == status)) or 0
        )

    return await database.run(work, isolation=RC)


class _Execution:
    """Execution's own recording, called in process (its gRPC servicer is not assembled yet)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def record(self, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        acks = await record_outcome_messages(self.database, [outcome_to_proto(o) for o in outcomes])
        return [ack_from_proto(a) for a in acks]


def _claim(
    database: Database,
    connections: int,
    transformation_id: bytes,
    process_id: bytes,
    params: DispatchParams,
) -> Operation:
    parcels = execution.parcels

    async def setup() -> None:
        await _reseed(database, transformation_id, process_id, params.parcels)

    async def claim_batch(conn: Any) -> int:
        claimed = (
            (
                await conn.execute(
                    sa.select(parcels.c.ParcelID)
                    .where(
                        parcels.c.Kind == Kind.COMPUTE.value,
                        parcels.c.Status == ParcelStatus.UNASSIGNED.value,
                    )
                    .order_by(parcels.c.ParcelID)
                    .limit(params.claim_batch)
                    .with_for_update(skip_locked=True)
                )
            )
            .scalars()
            .all()
        )
        if not claimed:
            return 0
        result = await conn.execute(
            sa.update(parcels)
            .where(parcels.c.ParcelID.in_(claimed), parcels.c.Status == "Unassigned")
            .values(Status=ParcelStatus.RESERVED.value)
        )
        return int(result.rowcount)

    async def claimer() -> int:
        total = 0
        while claimed := await database.run(claim_batch, isolation=RC):
            total += claimed
        return total

    async def claim_all() -> int:
        counts = await asyncio.gather(*(claimer() for _ in range(connections)))
        if sum(counts) != params.parcels:
            raise FailedPrecondition(f"claimed {sum(counts)} of {params.parcels}")
        return params.parcels

    return Operation(claim_all, setup)


@contextlib.asynccontextmanager
async def _replicas(
    url: str, count: int, address: str, token: str, params: DispatchParams
) -> AsyncIterator[list[DispatcherComponent]]:
    databases: list[Database] = []
    components: list[DispatcherComponent] = []
    try:
        for _ in range(count):
            database = Database(url)
            await database.start()
            databases.append(database)
            settings = DispatcherSettings(
                backends=[{"name": "null", "address": address, "kind": "compute"}],
                claim_batch=params.claim_batch,
                submit_batch=params.submit_batch,
            )
            component = await build_dispatcher(
                database,
                settings=settings,
                definition=_Definition(database),
                sink=_Execution(database),
                token=token,
                start_sweeps=False,
            )
            components.append(component)
            await component.refresh()
        yield components
    finally:
        for component in components:
            await component.stop()
        for database in databases:
            await database.dispose()


@contextlib.asynccontextmanager
async def _null_adaptor(folder: Path) -> AsyncIterator[tuple[str, str, int]]:
    """`dxts.backends.null` in a process of its own; yields (address, token, process id)."""
    address = f"127.0.0.1:{free_port()}"
    token = DevKeys.load_or_create(folder).issue("dxts", "dxts-dispatcher", [CallerKind.DISPATCHER])
    environment = {
        **os.environ,
        "DXTS_LISTEN": address,
        "DXTS_DATA_DIR": str(folder),
        "DXTS_NULL_DELAY_S": "0",  # finished at once: the pipeline figure polls them
    }
    log = (folder / "null.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dxts.backends.null",
        env=environment,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=log,
    )
    try:
        async with channel(address, token=token, default_timeout=2) as ch:
            stub = backend_pb2_grpc.BackendAdaptorServiceStub(ch)
            # A loaded machine takes a while to start a Python process: wait for it, not for a
            # fixed number of tries, unless it exited.
            deadline = asyncio.get_running_loop().time() + ADAPTOR_START_S
            while True:
                with contextlib.suppress(Exception):
                    await stub.Describe(backend_pb2.DescribeRequest())
                    break
                if process.returncode is not None or (asyncio.get_running_loop().time() > deadline):
                    raise Unavailable(f"the null adaptor did not start: {folder / 'null.log'}")
                await asyncio.sleep(0.1)
        yield address, token, process.pid
    finally:
        process.terminate()
        await process.wait()
        log.close()
