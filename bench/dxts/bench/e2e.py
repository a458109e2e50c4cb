"""`e2e`: a whole production, every component its own process, at default settings.

A `LocalCluster` (dxts-definition, -execution, -accounting, -dispatcher and the null adaptor
finishing every parcel at once, each from its console script with the chart's environment and
its own token) runs over the harness's fresh database with every setting at its default, and
`e2e_workgraph.cwl` is submitted with N seeds: Seeds → Simulation (one seed a parcel) → Merge
(100 files a parcel), 2N inputs and 1.01N parcels. Figures, one JSON line each:

* `pipeline_parcels_per_s`: the `dispatch` benchmark's pipeline (Unassigned → Completing, one
  replica of two claim loops, as the cluster runs) measured first in the same run, in a scratch
  database of its own: the baseline of the rates below;
* `e2e_completed_s` (`params.seeds`): submit → Completed; baseline: the time the pipeline would
  take to move the run's parcels, so the ratio is what the rest of the production costs on top;
* `e2e_sim_parcels_per_s`: the Simulation parcels over the span from its first parcel Done to
  its last, against the pipeline's rate;
* `e2e_member_inputs_per_s`, `e2e_member_parcels_per_s` (`params.member`): each member's inputs
  and parcels over submit → its last parcel Done, against the pipeline's rate;
* `e2e_peak_rss_mb` and `e2e_cpu_s` (`params.component`): each process's peak resident size
  (baseline: its size when it became ready) and its CPU seconds from submit to Completed
  (baseline: that wall time, so the ratio is the share of one core it used);
* `e2e_database_mb` (baseline: the empty schema) and, on a MariaDB server on this machine,
  `e2e_database_cpu_s` (mariadbd's CPU over the run; the server is shared, so an upper bound);
* `e2e_cpu_ms_per_parcel`: the CPU the whole run cost per parcel, every component's and a local
  mariadbd's, against the same for the pipeline's rounds (`params.cores_used` and
  `params.pipeline_cores_used`: the cores each kept busy). Where both keep the machine's cores
  busy, the rates' ratio is about the inverse of this one: the production does its feeding,
  packing and outcome recording on the cores the pipeline spends on dispatching alone.

`--scale tiny|small|full` is 200, 10,000 or 1,000,000 seeds; `--seeds N` any other count.

`--replicas N` (N > 1) then runs the same production again, in a fresh database of its own, with
N replicas of execution and N of the dispatcher (each replica its own process, as a Deployment
scaled to N runs them), prints that run's figures too (`params.replicas`), and the speed-up:

* `e2e_replicas_completed_s`: submit → Completed with N replicas; baseline: the same with one
  of each, this invocation (the ratio below 1 is the speed-up's inverse; `params.speedup`);
* `e2e_replicas_sim_parcels_per_s`: the Simulation's rate with N replicas; baseline: with one
  (the ratio is the speed-up).
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import yaml

from dxts.bench import dispatch
from dxts.bench.cluster import Backend, LocalCluster
from dxts.bench.harness import Bench, scratch_database, significant
from dxts.bench.processes import CpuSpent, cpu_s, local_mariadbd_pid, status_kb
from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import InvalidArgument
from dxts.core.grpc import channel
from dxts.core.ids import id_from_str
from dxts.core.schema import definition, execution, metadata
from dxts.core.states import Kind, ParcelStatus, WorkgraphStatus
from dxts.v1 import common_pb2, definition_pb2, definition_pb2_grpc

RC = Isolation.READ_COMMITTED
DOCUMENT = Path(__file__).with_name("e2e_workgraph.cwl")
MERGE_GROUP = 100
POLL_S = 0.1
SAMPLE_S = 0.5  # how often the outcome backlog (parcels Assigned) is sampled
# The stand-in backend forgets a job two minutes after its outcome reached the dispatcher, as a
# batch system forgets old jobs: its memory is then the recent work's, not the whole run's. It
# reports no status report (`no_report`), as a backend running processes that declare none
# does: its default report for every parcel would be ignored by the recorder with a warning
# written into each parcel's annotations, work a real production does not do.
NULL_ENV = {
    "DXTS_NULL_OUTPUTS": '["out"]',
    "DXTS_NULL_DELAY_S": "0",
    "DXTS_NULL_RETAIN_S": "120",
    "DXTS_NULL_NO_REPORT": "1",
}
MB = 1024 * 1024
log = logging.getLogger("dxts.bench.e2e")


@dataclass(frozen=True)
class E2EParams:
    seeds: int
    pipeline: dispatch.DispatchParams
    replicas: int = 1  # > 1: a second run with that many of execution and of the dispatcher

    @property
    def parcels(self) -> int:
        return self.seeds + -(-self.seeds // MERGE_GROUP)

    @property
    def timeout_s(self) -> float:
        return 300.0 + self.seeds / 50


SCALES = {
    "tiny": E2EParams(200, replace(dispatch.SCALES["tiny"], replicas=(1,))),
    "small": E2EParams(10_000, replace(dispatch.SCALES["small"], replicas=(1,))),
    "full": E2EParams(1_000_000, replace(dispatch.SCALES["small"], replicas=(1,))),
}


def with_rows(params: E2EParams, rows: int) -> E2EParams:
    """`--seeds N` (or `--rows N`): N seeds."""
    return replace(params, seeds=rows)


def with_replicas(params: E2EParams, replicas: int) -> E2EParams:
    """`--replicas N`: a second run with N replicas of execution and of the dispatcher."""
    if replicas < 1:
        raise InvalidArgument(f"--replicas must be at least 1, got {replicas}", field="replicas")
    return replace(params, replicas=replicas)


def document(seeds: int) -> dict[str, Any]:
    """The benchmark's workgraph with `seeds` seeds."""
    body = yaml.safe_load(DOCUMENT.read_text())
    body["hints"]["dirac:Workgraph"]["hooks"]["Active"]["args"]["target_events"] = seeds
    body["inputs"]["seeds"]["dirac:Feeder"]["args"]["target_events"] = seeds
    return dict(body)


async def run(bench: Bench, params: E2EParams) -> None:
    pipeline = await _pipeline_rate(bench, params.pipeline)
    single = await _production(bench, bench.database, params, pipeline, replicas=1)
    if params.replicas == 1:
        return
    async with scratch_database(_server_of(bench.database)) as scratch:
        scaled = await _production(bench, scratch, params, pipeline, replicas=params.replicas)
    run_params = {"seeds": params.seeds, "parcels": params.parcels, "replicas": params.replicas}
    bench.report(
        "e2e_replicas_completed_s",
        scaled.completed_s,
        unit="s",
        baseline=single.completed_s,
        params={
            **run_params,
            # From the times as printed, so that a reader can check it against them.
            "speedup": round(significant(single.completed_s) / significant(scaled.completed_s), 3),
            "baseline": "e2e_completed_s with one replica of each, same run",
        },
    )
    bench.report(
        "e2e_replicas_sim_parcels_per_s",
        scaled.sim_parcels_per_s,
        unit="parcels/s",
        baseline=single.sim_parcels_per_s,
        params={**run_params, "baseline": "e2e_sim_parcels_per_s with one replica of each"},
    )


@dataclass(frozen=True)
class _Production:
    completed_s: float
    sim_parcels_per_s: float


async def _production(
    bench: Bench, database: Database, params: E2EParams, pipeline: _Pipeline, *, replicas: int
) -> _Production:
    """Run the workgraph to Completed over `database` with `replicas` of execution and of the
    dispatcher, and report its figures."""
    with tempfile.TemporaryDirectory(prefix="dxts-bench-e2e-") as folder:
        cluster = LocalCluster(
            Path(folder),
            db_url=database.url.render_as_string(hide_password=False),
            backends=[Backend("null", env=NULL_ENV)],
            migrate=False,  # the harness created the schema
            execution_replicas=replicas,
            dispatcher_replicas=replicas,
        )
        await asyncio.to_thread(cluster.__enter__)
        try:
            return await _measure(bench, database, cluster, params, pipeline, replicas)
        finally:
            await asyncio.to_thread(cluster.stop)


def _server_of(database: Database) -> str:
    """Where a scratch database beside `database` is made: its server, or a new SQLite file."""
    if database.is_sqlite:
        return "sqlite+aiosqlite://"
    return database.url.set(database="").render_as_string(hide_password=False)


@dataclass(frozen=True)
class _Pipeline:
    """The baseline: the dispatch pipeline's rate and what a round of it cost (the median of
    its timed rounds)."""

    parcels_per_s: float
    cpu_ms_per_parcel: float
    cores_used: float


async def _pipeline_rate(bench: Bench, params: dispatch.DispatchParams) -> _Pipeline:
    """The dispatch benchmark's pipeline figure, in a scratch database of its own."""
    costs: list[CpuSpent] = []
    async with scratch_database(_server_of(bench.database)) as scratch:
        baseline_bench = Bench(bench.name, bench.scale, scratch, bench.out)
        await dispatch.run(
            baseline_bench, params, figures=("pipeline_parcels_per_s",), pipeline_cpu=costs
        )
    (figure,) = baseline_bench.figures
    bench.figures.append(figure)
    timed = costs[1:] or costs  # the first round warms caches and pools, as in `compare`
    return _Pipeline(
        figure.value,
        statistics.median(cost.cpu_ms_per_unit for cost in timed),
        statistics.median(cost.cores_used for cost in timed),
    )


@dataclass
class _Run:
    """What was seen while the workgraph ran."""

    submitted_at: float = 0.0  # monotonic
    submitted_db: Any = None  # the database clock at submit
    completed_s: float = 0.0
    peak_assigned: int = 0
    # When the first input, parcel and parcel Done appeared (s after submit): the latency of
    # each hand-over before the flow starts.
    milestones: dict[str, float] = field(default_factory=dict)


async def _measure(
    bench: Bench,
    database: Database,
    cluster: LocalCluster,
    params: E2EParams,
    pipeline: _Pipeline,
    replicas: int,
) -> _Production:
    pids = {
        name: component.process.pid
        for name, component in cluster.components.items()
        if component.process is not None
    }
    ready_rss = {name: status_kb(pid, "VmRSS") / 1024 for name, pid in pids.items()}
    size_before = await _database_bytes(database)
    mariadbd = local_mariadbd_pid(database)
    cpu_before = {name: cpu_s(pid) for name, pid in pids.items()}
    db_cpu_before = cpu_s(mariadbd) if mariadbd else 0.0
    token = cluster.user_token("lhcb", "bench", ["operator", "user"])
    seen = _Run()
    async with channel(cluster.addresses["definition"], token=token) as opened:
        stub = definition_pb2_grpc.DefinitionServiceStub(opened)
        seen.submitted_db = await database.run(db_now, isolation=RC)
        seen.submitted_at = time.monotonic()
        files = {"workgraph.cwl": yaml.safe_dump(document(params.seeds), sort_keys=False).encode()}
        reply = await stub.SubmitWorkgraph(
            definition_pb2.SubmitWorkgraphRequest(
                request_id=str(uuid.uuid4()),
                bundle=common_pb2.DocumentBundle(main_path="workgraph.cwl", files=files),
            ),
            timeout=60,
        )
        await stub.StartWorkgraph(
            definition_pb2.StartWorkgraphRequest(
                request_id=str(uuid.uuid4()), workgraph_id=reply.workgraph_id, reason="e2e bench"
            ),
            timeout=60,
        )
        got = await stub.GetWorkgraph(
            definition_pb2.GetWorkgraphRequest(workgraph_id=reply.workgraph_id), timeout=60
        )
        members = {m.step: id_from_str(m.transformation_id) for m in got.members}
        await _until_completed(database, id_from_str(reply.workgraph_id), params, seen)
    wall_s = seen.completed_s
    cpu = {name: cpu_s(pid) - cpu_before[name] for name, pid in pids.items()}
    peak_rss = {name: status_kb(pid, "VmHWM") / 1024 for name, pid in pids.items()}
    db_cpu = cpu_s(mariadbd) - db_cpu_before if mariadbd else None
    run_params = {
        "seeds": params.seeds,
        "parcels": params.parcels,
        "settings": "defaults",
        "replicas": replicas,
    }
    bench.report(
        "e2e_completed_s",
        wall_s,
        unit="s",
        baseline=params.parcels / pipeline.parcels_per_s,
        params={
            **run_params,
            **seen.milestones,
            "baseline": "the run's parcels at pipeline_parcels_per_s",
        },
    )
    spans = await _member_spans(database, members, seen.submitted_db)
    sim = spans["Simulation"]
    bench.report(
        "e2e_sim_parcels_per_s",
        sim.throughput,
        unit="parcels/s",
        baseline=pipeline.parcels_per_s,
        params={
            **run_params,
            "span": "first to last Simulation parcel Done",
            "peak_assigned_parcels": seen.peak_assigned,
            "baseline": "pipeline_parcels_per_s, same run",
        },
    )
    for member, span in spans.items():
        for figure, count in (
            ("e2e_member_inputs_per_s", span.inputs),
            ("e2e_member_parcels_per_s", span.parcels),
        ):
            bench.report(
                figure,
                count / span.since_submit_s,
                unit=figure.removeprefix("e2e_member_").replace("_per_", "/"),
                baseline=pipeline.parcels_per_s,
                params={
                    **run_params,
                    "member": member,
                    "count": count,
                    "span": "submit to the member's last parcel Done",
                },
            )
    for name in pids:
        bench.report(
            "e2e_peak_rss_mb",
            peak_rss[name],
            unit="MB",
            baseline=ready_rss[name],
            params={**run_params, "component": name, "baseline": "resident size when ready"},
        )
        bench.report(
            "e2e_cpu_s",
            max(cpu[name], 0.01),
            unit="s",
            baseline=wall_s,
            params={**run_params, "component": name, "baseline": "submit → Completed wall time"},
        )
    bench.report(
        "e2e_database_mb",
        await _database_bytes(database) / MB,
        unit="MB",
        baseline=size_before / MB,
        params={
            **run_params,
            **await _server_memory(database),
            "baseline": "the empty schema",
        },
    )
    if db_cpu is not None:
        bench.report(
            "e2e_database_cpu_s",
            max(db_cpu, 0.01),
            unit="s",
            baseline=wall_s,
            params={**run_params, "note": "mariadbd is shared: other clients' CPU included"},
        )
    spent = CpuSpent(sum(cpu.values()) + (db_cpu or 0.0), wall_s, params.parcels)
    bench.report(
        "e2e_cpu_ms_per_parcel",
        spent.cpu_ms_per_unit,
        unit="ms",
        baseline=pipeline.cpu_ms_per_parcel,
        params={
            **run_params,
            "cores_used": round(spent.cores_used, 3),
            "pipeline_cores_used": round(pipeline.cores_used, 3),
            "what": "every component's CPU, and a local mariadbd's, per parcel of the run",
            "baseline": "the same per parcel of the pipeline's rounds, same run",
        },
    )
    return _Production(wall_s, sim.throughput)


async def _until_completed(
    database: Database, workgraph_id: bytes, params: E2EParams, seen: _Run
) -> None:
    workgraphs, parcels = definition.workgraphs, execution.parcels
    deadline = seen.submitted_at + params.timeout_s
    sampled = 0.0

    async def status(conn: Any) -> str:
        return str(
            await conn.scalar(
                sa.select(workgraphs.c.Status).where(workgraphs.c.WorkgraphID == workgraph_id)
            )
        )

    firsts = {
        "first_input_s": sa.select(execution.inputs.c.InputID).limit(1),
        "first_parcel_s": sa.select(parcels.c.ParcelID).limit(1),
        "first_done_s": sa.select(parcels.c.ParcelID)
        .where(
            parcels.c.Kind.in_([kind.value for kind in Kind]),
            parcels.c.Status == ParcelStatus.DONE.value,
        )
        .limit(1),
    }

    async def milestones(conn: Any) -> list[str]:
        return [
            name
            for name, query in firsts.items()
            if name not in seen.milestones and await conn.scalar(query) is not None
        ]

    async def assigned(conn: Any) -> int:
        found = await conn.scalar(
            sa.select(sa.func.count()).where(
                # Every kind named: a range of the (Kind, Status) index, not a scan of it.
                parcels.c.Kind.in_([kind.value for kind in Kind]),
                parcels.c.Status == ParcelStatus.ASSIGNED.value,
            )
        )
        return int(found or 0)

    while True:
        now = time.monotonic()
        if await database.run(status, isolation=RC) == WorkgraphStatus.COMPLETED:
            seen.completed_s = now - seen.submitted_at
            return
        if len(seen.milestones) < len(firsts):
            for name in await database.run(milestones, isolation=RC):
                seen.milestones[name] = round(now - seen.submitted_at, 2)
        if now > deadline:
            raise TimeoutError(f"the workgraph did not complete in {params.timeout_s:.0f} s")
        if now - sampled >= SAMPLE_S:
            sampled = now
            seen.peak_assigned = max(seen.peak_assigned, await database.run(assigned, isolation=RC))
        await asyncio.sleep(POLL_S)


@dataclass(frozen=True)
class _Span:
    inputs: int
    parcels: int
    since_submit_s: float
    throughput: float  # parcels/s from the first parcel Done to the last


async def _member_spans(
    database: Database, members: Mapping[str, bytes], submitted_db: Any
) -> dict[str, _Span]:
    inputs, parcels = execution.inputs, execution.parcels

    async def work(conn: Any) -> dict[str, _Span]:
        spans = {}
        for name, member in members.items():
            counted = await conn.scalar(
                sa.select(sa.func.count()).where(inputs.c.TransformationID == member)
            )
            done, first, last = (
                await conn.execute(
                    sa.select(
                        sa.func.count(),
                        sa.func.min(parcels.c.CompletedAt),
                        sa.func.max(parcels.c.CompletedAt),
                    ).where(
                        parcels.c.TransformationID == member,
                        parcels.c.Status == ParcelStatus.DONE.value,
                    )
                )
            ).one()
            since_submit = max((last - submitted_db).total_seconds(), 1e-3)
            moving = (last - first).total_seconds()
            throughput = (done - 1) / moving if done > 1 and moving > 0 else done / since_submit
            spans[name] = _Span(int(counted or 0), int(done), since_submit, throughput)
        return spans

    return await database.run(work, isolation=RC)


async def _database_bytes(database: Database) -> int:
    """The schema's size: the file on SQLite; tables and indexes on MariaDB (statistics
    refreshed first: InnoDB's are otherwise sampled lazily)."""
    if database.is_sqlite:
        path = database.url.database
        return await asyncio.to_thread(os.path.getsize, path) if path else 0
    async with database.engine.connect() as conn:
        names = ", ".join(f"`{table.name}`" for table in metadata.sorted_tables)
        await conn.execute(sa.text(f"ANALYZE TABLE {names}"))
        found = await conn.scalar(
            sa.text(
                "SELECT SUM(DATA_LENGTH + INDEX_LENGTH) FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = DATABASE()"
            )
        )
    return int(found or 0)


async def _server_memory(database: Database) -> dict[str, int]:
    """The InnoDB memory the server was given (MB): once the schema outgrows its buffer pool,
    the server's CPU per row climbs, so a figure is read with the pool it ran on."""
    if database.is_sqlite:
        return {}
    async with database.engine.connect() as conn:
        row = (
            await conn.execute(sa.text("SELECT @@innodb_buffer_pool_size, @@innodb_log_file_size"))
        ).one()
    return {"innodb_buffer_pool_mb": int(row[0]) // MB, "innodb_log_file_mb": int(row[1]) // MB}
