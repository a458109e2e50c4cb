"""The fault suite: every component killed in turn while a workgraph runs, and the run still ends
right. `python -m dxts.bench.chaos [--seeds N] [--db-url URL] [--fault NAME ...]` (or
`scripts/chaos`) prints one JSON line per fault and a summary line.

On a `LocalCluster` (every component its own process, two dispatcher replicas, one null
adaptor) over MariaDB, each fault gets a workgraph of its own — Seeds → Sim (one seed a parcel)
→ Merge (`MERGE_GROUP` a parcel) — and, once a fifth of its seeds are processed, one fault:

* `definition`, `execution`, `accounting`, `backend-null`: kill -9 and start again;
* `dispatcher`: kill -9 of both replicas, and start again;
* `database`: kill -9 of mariadbd, started again the way the machine starts it;
* `pause-dispatcher`: SIGSTOP of one dispatcher for `PAUSE_S`, then SIGCONT.

It survived when the workgraph reaches Completed with the invariants intact (`check`): every
input terminal, no input in two successful parcels, the counters equal COUNT(*), no parcel left
Reserved, Assigned or Completing. `recover_s` is from the fault's injection to the first input
made terminal after the fault ended; `complete_s` from the injection to Completed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
import sqlalchemy as sa
import yaml

from dxts.bench.cluster import Backend, LocalCluster, fast_pacing
from dxts.bench.harness import scratch_database
from dxts.core.counters import TRANSFORMATION
from dxts.core.db import Database, Isolation
from dxts.core.grpc import channel
from dxts.core.grpc.calls import method_on, request_type
from dxts.core.ids import id_from_str
from dxts.core.schema import definition, execution
from dxts.core.states import InputStatus, ParcelStatus, WorkgraphStatus
from dxts.v1 import common_pb2, definition_pb2, definition_pb2_grpc
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer as Definition

RC = Isolation.READ_COMMITTED
PACE_S = 0.2
PAUSE_S = 10.0
MERGE_GROUP = 20
COMPLETE_TIMEOUT_S = 300.0
PROGRESS_TIMEOUT_S = 120.0
DATABASE_TIMEOUT_S = 60.0
DISPATCHERS = ("dispatcher", "dispatcher-2")
NULL_ENV = {"DXTS_NULL_OUTPUTS": '["out"]', "DXTS_NULL_DELAY_S": "0.5"}  # half a second a parcel
LIVE_PARCELS = (ParcelStatus.RESERVED, ParcelStatus.ASSIGNED, ParcelStatus.COMPLETING)
TERMINAL_INPUTS = (InputStatus.PROCESSED, InputStatus.SPLIT, InputStatus.NOT_PROCESSED)
FAULTS = (
    "definition",
    "execution",
    "accounting",
    "dispatcher",
    "database",
    "pause-dispatcher",
    "backend-null",
)
# Faults known to fail today, and why (the report says so; the suite does not count them).
# Faults the suite knows it does not survive yet, each with its reason (reported, not counted).
EXPECTED_FAILURES: dict[str, str] = {}
log = logging.getLogger("dxts.bench.chaos")


@dataclass
class FaultReport:
    """One JSON line of the report."""

    fault: str
    injected: str
    seeds: int
    survived: bool = False
    recover_s: float | None = None
    complete_s: float | None = None
    problems: list[str] = field(default_factory=list)
    expected_failure: str | None = None


# -- the workgraph ------------------------------------------------------------------------------

STRINGS_OR_FILES = {"type": "array", "items": ["File", "string"]}


def document(seeds: int) -> dict[str, Any]:
    """Seeds → Sim (one seed a parcel) → Merge (MERGE_GROUP files a parcel)."""
    tool = {
        "class": "CommandLineTool",
        "baseCommand": ["true"],
        "inputs": {"files": {"type": STRINGS_OR_FILES}},
        "outputs": {"out": {"type": "File", "outputBinding": {"glob": "out.txt"}}},
    }

    def step(source: str, packer: dict[str, Any]) -> dict[str, Any]:
        return {
            "hints": {"dirac:Transformation": {"packer": packer}},
            "run": tool,
            "in": {"files": source},
            "out": ["out"],
        }

    return {
        "cwlVersion": "v1.2",
        "class": "Workflow",
        "$namespaces": {"dirac": "https://diracgrid.org/cwl#"},
        "hints": {
            "dirac:Workgraph": {
                "schema_version": "1.0",
                "hooks": {"Active": {"hook": "OutputTarget", "args": {"target_events": seeds}}},
            }
        },
        "inputs": {
            "seeds": {
                "type": STRINGS_OR_FILES,
                "dirac:Feeder": {
                    "name": "Seeds",
                    "args": {"target_events": seeds, "events_per_seed": 1},
                },
            }
        },
        "steps": {
            "Sim": step("seeds", {"name": "PerInput", "args": {"input_parameter": "files"}}),
            "Merge": step(
                "Sim/out",
                {
                    "name": "BySize",
                    "args": {"input_parameter": "files", "group_size": MERGE_GROUP},
                },
            ),
        },
        "outputs": {"merged": {"type": "File", "outputSource": "Merge/out"}},
    }


# -- reads and checks ---------------------------------------------------------------------------


async def _members(database: Database, workgraph_id: bytes) -> list[bytes]:
    t, o = definition.transformations, definition.ownership
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(t.c.TransformationID)
            .select_from(t.join(o, o.c.OwnershipID == t.c.OwnershipID))
            .where(o.c.WorkgraphID == workgraph_id)
        )
        return [bytes(tid) for (tid,) in rows]


async def _status(database: Database, workgraph_id: bytes) -> str:
    w = definition.workgraphs
    async with database.transaction(RC) as conn:
        found = await conn.scalar(sa.select(w.c.Status).where(w.c.WorkgraphID == workgraph_id))
    return str(found)


async def _terminal_inputs(database: Database, members: Sequence[bytes]) -> int:
    i = execution.inputs
    async with database.transaction(RC) as conn:
        found = await conn.scalar(
            sa.select(sa.func.count()).where(
                i.c.TransformationID.in_(members),
                i.c.Status.in_([s.value for s in TERMINAL_INPUTS]),
            )
        )
    return int(found or 0)


async def check(database: Database, workgraph_id: bytes) -> list[str]:
    """What is wrong with a workgraph that should be Completed (empty: nothing)."""
    members = await _members(database, workgraph_id)
    problems = []
    status = await _status(database, workgraph_id)
    if status != WorkgraphStatus.COMPLETED:
        problems.append(f"the workgraph is {status}")
    i, p, pi = execution.inputs, execution.parcels, execution.parcel_inputs
    async with database.transaction(RC) as conn:
        live_inputs = await conn.scalar(
            sa.select(sa.func.count()).where(
                i.c.TransformationID.in_(members),
                i.c.Status.not_in([s.value for s in TERMINAL_INPUTS]),
            )
        )
        if live_inputs:
            problems.append(f"{live_inputs} inputs not terminal")
        live_parcels = await conn.scalar(
            sa.select(sa.func.count()).where(
                p.c.TransformationID.in_(members), p.c.Status.in_([s.value for s in LIVE_PARCELS])
            )
        )
        if live_parcels:
            problems.append(f"{live_parcels} parcels left Reserved, Assigned or Completing")
        succeeded = (
            sa.select(pi.c.TransformationID, pi.c.InputID, sa.func.count().label("parcels"))
            .select_from(pi.join(p, p.c.ParcelID == pi.c.ParcelID))
            .where(
                pi.c.TransformationID.in_(members),
                p.c.Status.in_([ParcelStatus.DONE.value, ParcelStatus.PARTIALLY_DONE.value]),
            )
            .group_by(pi.c.TransformationID, pi.c.InputID)
            .subquery()
        )
        twice = await conn.scalar(
            sa.select(sa.func.count()).select_from(succeeded).where(succeeded.c.parcels > 1)
        )
        if twice:
            problems.append(f"{twice} inputs processed by two parcels or more")
        processed = await conn.scalar(
            sa.select(sa.func.count()).where(
                i.c.TransformationID.in_(members), i.c.Status == InputStatus.PROCESSED.value
            )
        )
        in_one = await conn.scalar(sa.select(sa.func.count()).select_from(succeeded))
        if processed != in_one:
            problems.append(f"{processed} inputs Processed, {in_one} in a successful parcel")
        problems += await _counter_problems(conn, members)
    return problems


async def _counter_problems(conn: Any, members: Sequence[bytes]) -> list[str]:
    reading = await TRANSFORMATION.read(conn, {"TransformationID": list(members)})
    counters = {
        (bytes(tid), str(entity), str(status)): int(values["Count"])
        for (tid, entity, status), values in reading.items()
        if values["Count"]
    }
    counted: dict[tuple[bytes, str, str], int] = {}
    for entity, table in (("Input", execution.inputs), ("Parcel", execution.parcels)):
        rows = await conn.execute(
            sa.select(table.c.TransformationID, table.c.Status, sa.func.count())
            .where(table.c.TransformationID.in_(members))
            .group_by(table.c.TransformationID, table.c.Status)
        )
        counted |= {(bytes(t), entity, str(s)): int(n) for t, s, n in rows}
    if counters == counted:
        return []
    differing = sorted(
        f"{entity}.{status}: counter {counters.get((t, entity, status), 0)}, rows {n}"
        for (t, entity, status), n in {**counters, **counted}.items()
        if counters.get((t, entity, status), 0) != counted.get((t, entity, status), 0)
        for n in [counted.get((t, entity, status), 0)]
    )
    return [f"counters differ from COUNT(*): {differing}"]


async def _until(
    what: str, condition: Callable[[], Awaitable[bool]], timeout_s: float, pace_s: float = PACE_S
) -> None:
    """Poll `condition` (its errors — a database coming back — are waited out) until true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(sa.exc.DBAPIError, OSError):
            if await condition():
                return
        await asyncio.sleep(pace_s)
    raise TimeoutError(f"{what} after {timeout_s:.0f} s")


# -- the faults ---------------------------------------------------------------------------------


def _mariadb_up() -> bool:
    result = subprocess.run(
        ["mariadb-admin", "--host=127.0.0.1", "--user=root", "ping"],
        capture_output=True,
        check=False,
    )
    return result.returncode == 0


def kill_database() -> str:
    """kill -9 of mariadbd, then started again as the machine starts it, and waited for."""
    pids = subprocess.run(["pidof", "mariadbd"], capture_output=True, text=True, check=False)
    for pid in pids.stdout.split():
        subprocess.run(["kill", "-9", pid], check=False)
    deadline = time.monotonic() + DATABASE_TIMEOUT_S
    while subprocess.run(["pidof", "mariadbd"], capture_output=True, check=False).returncode == 0:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    start_database()
    return f"kill -9 mariadbd ({' '.join(pids.stdout.split()) or 'not running'}), started again"


def start_database() -> None:
    """Start mariadbd the way this machine does (a no-op when it runs) and wait for it."""
    subprocess.run(
        [
            "start-stop-daemon",
            "--start",
            "--oknodo",
            "--background",
            "--exec",
            "/usr/sbin/mariadbd",
        ],
        check=False,
    )
    deadline = time.monotonic() + DATABASE_TIMEOUT_S
    while not _mariadb_up():
        if time.monotonic() > deadline:
            raise RuntimeError("MariaDB did not come back")
        time.sleep(0.5)


def inject(cluster: LocalCluster, fault: str, pause_s: float) -> str:
    """Inject `fault` and end it (restart, resume); returns what was done."""
    if fault == "database":
        return kill_database()
    if fault == "pause-dispatcher":
        cluster.pause(DISPATCHERS[1])
        time.sleep(pause_s)
        cluster.resume(DISPATCHERS[1])
        return f"SIGSTOP {DISPATCHERS[1]} for {pause_s:.0f} s, then SIGCONT"
    names = DISPATCHERS if fault == "dispatcher" else (fault,)
    for name in names:
        cluster.kill(name)
    for name in names:
        cluster.restart(name)
    return f"kill -9 {' and '.join(names)}, started again"


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Run:
    cluster: LocalCluster
    database: Database
    definition: Any  # DefinitionServiceStub (operator)
    seeds: int
    pause_s: float = PAUSE_S
    complete_timeout_s: float = COMPLETE_TIMEOUT_S

    async def submit(self) -> bytes:
        files = {"workgraph.cwl": yaml.safe_dump(document(self.seeds), sort_keys=False).encode()}
        reply = await self.definition.SubmitWorkgraph(
            definition_pb2.SubmitWorkgraphRequest(
                request_id=str(uuid.uuid4()),
                bundle=common_pb2.DocumentBundle(main_path="workgraph.cwl", files=files),
            )
        )
        await self._call(
            Definition.StartWorkgraph, workgraph_id=reply.workgraph_id, reason="the fault suite"
        )
        return id_from_str(reply.workgraph_id)

    async def _call(self, method: Callable[..., object], **fields: Any) -> Any:
        request = request_type(method)(request_id=str(uuid.uuid4()), **fields)
        return await method_on(self.definition, method)(request, timeout=30)

    async def one(self, fault: str) -> FaultReport:
        workgraph_id = await self.submit()
        members: list[bytes] = []

        async def started() -> bool:
            members[:] = await _members(self.database, workgraph_id)
            return await _terminal_inputs(self.database, members) >= self.seeds // 5

        await _until("a fifth of the seeds processed", started, PROGRESS_TIMEOUT_S)
        injected_at = time.monotonic()
        report = FaultReport(fault, "", self.seeds, expected_failure=EXPECTED_FAILURES.get(fault))
        report.injected = await asyncio.to_thread(inject, self.cluster, fault, self.pause_s)
        if fault == "database":
            await self.database.engine.dispose()  # its connections died with the server
        ended = await self._terminal_or_none(members)
        baseline = [] if ended is None else [ended]

        async def completed() -> bool:
            return await _status(self.database, workgraph_id) == WorkgraphStatus.COMPLETED

        async def progressed() -> bool:
            now = await _terminal_inputs(self.database, members)
            if not baseline:  # the database was not there yet when the fault ended
                baseline.append(now)
            return now > baseline[0] or await completed()

        # A fault known to fail is given half a minute, not the full wait, to show it still does.
        timeout_s = self.complete_timeout_s if report.expected_failure is None else 30.0
        try:
            await _until("progress after the fault", progressed, timeout_s)
            report.recover_s = round(time.monotonic() - injected_at, 2)
            await _until("Completed", completed, timeout_s)
            report.complete_s = round(time.monotonic() - injected_at, 2)
        except TimeoutError as error:
            report.problems.append(str(error))
        report.problems += await check(self.database, workgraph_id)
        report.survived = not report.problems
        return report

    async def _terminal_or_none(self, members: Sequence[bytes]) -> int | None:
        try:
            return await _terminal_inputs(self.database, members)
        except sa.exc.DBAPIError:
            return None


async def run_suite(
    directory: Path,
    *,
    db_url: str | None,
    seeds: int,
    faults: Sequence[str] = FAULTS,
    pause_s: float = PAUSE_S,
    complete_timeout_s: float = COMPLETE_TIMEOUT_S,
    emit: Callable[[dict[str, Any]], None] = lambda line: print(json.dumps(line), flush=True),
) -> list[FaultReport]:
    """Every fault of `faults` in turn on one cluster over a scratch database on `db_url`'s
    server (see the module); each report is emitted as it is known, then a summary."""
    start_database()
    reports = []
    async with scratch_database(db_url) as database:
        url = database.engine.url.render_as_string(hide_password=False)
        cluster = LocalCluster(
            directory,
            db_url=url,
            backends=[Backend("null", env=NULL_ENV)],
            env=fast_pacing(PACE_S),
            migrate=False,
            replicas={"dispatcher": len(DISPATCHERS)},
        )
        await asyncio.to_thread(cluster.__enter__)
        token = cluster.token("chaos", "operator", ["operator", "user"])
        opened = channel(cluster.addresses["definition"], token=token)
        try:
            stub = definition_pb2_grpc.DefinitionServiceStub(opened)
            run = Run(cluster, database, stub, seeds, pause_s, complete_timeout_s)
            for fault in faults:
                try:
                    report = await run.one(fault)
                except (grpc.RpcError, TimeoutError, sa.exc.DBAPIError) as error:
                    report = FaultReport(fault, "", seeds, problems=[repr(error)])
                    report.expected_failure = EXPECTED_FAILURES.get(fault)
                reports.append(report)
                emit(asdict(report))
        finally:
            await opened.close()
            await asyncio.to_thread(cluster.stop)
            start_database()
    counted = [r for r in reports if r.expected_failure is None]
    emit(
        {
            "faults_injected": len(reports),
            "survived": sum(r.survived for r in reports),
            "failed": [r.fault for r in counted if not r.survived],
            "expected_failures": [r.fault for r in reports if r.expected_failure is not None],
            "seeds": seeds,
        }
    )
    return reports


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if "--galera" in arguments:  # the Galera cluster's faults: dxts.bench.chaos_galera
        from dxts.bench import chaos_galera

        return chaos_galera.main([a for a in arguments if a != "--galera"])
    parser = argparse.ArgumentParser(prog="python -m dxts.bench.chaos", description=__doc__)
    parser.add_argument("--seeds", type=int, default=1000, help="seeds per workgraph")
    parser.add_argument(
        "--db-url", default=None, help="a MariaDB server URL (default: the local one)"
    )
    parser.add_argument("--fault", action="append", choices=FAULTS, help="(default: all)")
    parser.add_argument("--pause-s", type=float, default=PAUSE_S)
    parser.add_argument("--keep", action="store_true", help="keep the cluster's logs")
    args = parser.parse_args(arguments)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    directory = Path(tempfile.mkdtemp(prefix="dxts-chaos-"))
    try:
        reports = asyncio.run(
            run_suite(
                directory,
                db_url=args.db_url,
                seeds=args.seeds,
                faults=args.fault or FAULTS,
                pause_s=args.pause_s,
            )
        )
    finally:
        if args.keep:
            print(f"logs: {directory / 'logs'}", file=sys.stderr)
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return 0 if all(r.survived or r.expected_failure for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
