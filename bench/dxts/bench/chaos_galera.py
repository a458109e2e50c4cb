"""The fault suite on a Galera cluster: nodes of the database killed while a workgraph runs, and
the run still ends right. `scripts/chaos --galera [--seeds N] [--fault NAME ...]` (or
`python -m dxts.bench.chaos_galera`) prints one JSON line per fault and a summary line.

It needs the three-node cluster of `scripts/galera start` (HAProxy on 127.0.0.1:28300, or
`--db-url`), and drives its nodes through that script. The components are the fault suite's
(`dxts.bench.chaos`): every component its own process, two dispatcher replicas, a null adaptor,
all given the HAProxy URL. Each fault gets a workgraph of its own and is injected once a fifth
of its seeds are processed:

* `writer`: kill -9 of the node HAProxy writes to; HAProxy fails over to the next node. Once
  the production moves again the node is started at its recovered position (IST), HAProxy
  moves back to it and cuts the sessions on the other node: a second, smaller failover.
* `non-writer`: kill -9 of a node nobody writes to, then the same rejoin.
* `restart-node`: a clean stop of a non-writing node, then its rejoin (IST).
* `quorum`: kill -9 of the writer and of a second node. The survivor leaves the primary
  component and refuses every statement; HAProxy has no node. After `--quorum-hold-s` the
  survivor is made primary (`pc.bootstrap`); once the production moves again the two are
  started again (IST), one after the other.

A fault is survived on the same invariants as the fault suite's (every input terminal, none in
two successful parcels, counters equal to COUNT(*), no parcel left live) and one more: every
node holds the same rows (`nodes_agree`: per-node counts and checksums of Inputs and Parcels).
Figures: `stall_s`, from the injection to the first input made terminal after it (how long the
production stood still at the failover); `recover_s`, from the end of the fault (the node back
and Synced; for `writer` HAProxy then moves back to it) to the next input made terminal;
`complete_s`, from the injection to Completed; `terminal_while_down` (quorum: inputs made
terminal from the injection to the bootstrap, read on the survivor at once: while no node was
primary nothing could be written, so what it shows is only what committed before the kill).
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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from dxts.bench import chaos
from dxts.bench.cluster import Backend, LocalCluster, fast_pacing
from dxts.bench.harness import scratch_database
from dxts.core.db import Database
from dxts.core.errors import Unavailable
from dxts.core.grpc import channel
from dxts.core.schema import execution
from dxts.core.states import WorkgraphStatus
from dxts.v1 import definition_pb2_grpc

REPO = Path(__file__).resolve().parents[3]
GALERA = REPO / "scripts" / "galera"
DEFAULT_URL = "mysql+asyncmy://dxts:dxts@127.0.0.1:28300/"
NODES = (1, 2, 3)
FAULTS = ("writer", "non-writer", "restart-node", "quorum")
QUORUM_HOLD_S = 15.0
STALL_TIMEOUT_S = 120.0
log = logging.getLogger("dxts.bench.chaos_galera")


@dataclass
class GaleraReport:
    """One JSON line of the report."""

    fault: str
    injected: str = ""
    ended: str = ""
    seeds: int = 0
    survived: bool = False
    stall_s: float | None = None
    recover_s: float | None = None
    complete_s: float | None = None
    terminal_while_down: int | None = None
    problems: list[str] = field(default_factory=list)


def galera(*args: str) -> str:
    """Run `scripts/galera ARGS`; its stdout. A failure carries the script's own stderr."""
    done = subprocess.run([str(GALERA), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/galera {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def writer() -> int:
    return int(galera("writer"))


def wait_synced(timeout_s: float = 180.0) -> None:
    """Until every node is Synced and HAProxy has a writer (`scripts/galera status`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = subprocess.run([str(GALERA), "status"], capture_output=True, check=False)
        if status.returncode == 0:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the cluster is not all Synced after {timeout_s:.0f} s:\n{galera_status()}")


def galera_status() -> str:
    return subprocess.run(
        [str(GALERA), "status"], capture_output=True, text=True, check=False
    ).stdout


def inject(fault: str) -> tuple[str, Callable[[], str]]:
    """Inject `fault`; what was done, and the function that ends it (and says what it did)."""
    first = writer()
    others = [n for n in NODES if n != first]
    if fault == "writer":
        galera("kill", str(first))
        return f"kill -9 node {first} (the writer)", lambda: rejoin(first, wait=True)
    if fault == "non-writer":
        galera("kill", str(others[-1]))
        return f"kill -9 node {others[-1]} (not written to)", lambda: rejoin(others[-1], wait=True)
    if fault == "restart-node":
        galera("stop", str(others[-1]))
        return f"clean stop of node {others[-1]} (not written to)", lambda: rejoin(
            others[-1], wait=True
        )
    if fault == "quorum":
        survivor = others[-1]
        galera("kill", str(first))
        galera("kill", str(others[0]))

        def restore() -> str:
            # The survivor believes in the old primary component until it has given up on
            # the dead nodes (about 6 s): a bootstrap before that changes nothing.
            deadline = time.monotonic() + 60
            while node_state(survivor) == "Synced" and time.monotonic() < deadline:
                time.sleep(0.5)
            galera("bootstrap", str(survivor))
            return f"node {survivor} bootstrapped (pc.bootstrap)"

        return f"kill -9 nodes {first} (the writer) and {others[0]}: no quorum", restore
    raise ValueError(f"unknown fault {fault!r}")


def rejoin_all() -> str:
    """Every node that is down started again, one at a time, each waited for until Synced."""
    down = [n for n in NODES if node_state(n) == "down"]
    for node in down:
        rejoin(node, wait=True)
    return f"nodes {' and '.join(map(str, down))} rejoined (IST)"


def rejoin(node: int, *, wait: bool = False) -> str:
    """Start `node` again at its recovered position; with `wait`, until it is Synced (the
    next joiner must not start while it still takes its state transfer)."""
    galera("rejoin", str(node))
    deadline = time.monotonic() + 180
    while wait and node_state(node) != "Synced":
        if time.monotonic() > deadline:
            raise RuntimeError(f"node {node} did not rejoin:\n{galera_status()}")
        time.sleep(0.5)
    return f"node {node} started at its recovered position" + (" and Synced" if wait else "")


def node_state(node: int) -> str:
    """A node's wsrep state as `scripts/galera status` prints it (Synced, Joining, down...)."""
    for line in galera_status().splitlines():
        name, _, state = [*line.split(maxsplit=2), "", ""][:3]
        if name == f"n{node}":
            return state
    return "unknown"


async def _until(what: str, condition: Callable[[], Awaitable[bool]], timeout_s: float) -> None:
    """Poll `condition` until true; a database that is away (a failover) is waited out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(sa.exc.DBAPIError, OSError, Unavailable):
            if await condition():
                return
        await asyncio.sleep(chaos.PACE_S)
    raise TimeoutError(f"{what} after {timeout_s:.0f} s")


async def terminal(database: Database, members: Sequence[bytes]) -> int | None:
    with contextlib.suppress(sa.exc.DBAPIError, OSError, Unavailable):
        return await chaos._terminal_inputs(database, members)
    return None


def node_url(database: Database, node: int) -> sa.URL:
    """The URL of one node itself, beside HAProxy's (node N listens on HAProxy's port + N)."""
    return database.url.set(port=(database.url.port or 28300) + node)


async def terminal_on(database: Database, node: int, members: Sequence[bytes]) -> int:
    """Inputs made terminal, read on `node` directly."""
    engine = create_async_engine(node_url(database, node), poolclass=sa.pool.NullPool)
    i = execution.inputs
    try:
        async with engine.connect() as conn:
            found = await conn.scalar(
                sa.select(sa.func.count()).where(
                    i.c.TransformationID.in_(members),
                    i.c.Status.in_([s.value for s in chaos.TERMINAL_INPUTS]),
                )
            )
    finally:
        await engine.dispose()
    return int(found or 0)


async def nodes_agree(database: Database, members: Sequence[bytes]) -> list[str]:
    """The same rows on every node: counts and a checksum of the workgraph's Inputs and
    Parcels read on each node directly (causally: after it applied every commit)."""
    seen: dict[int, tuple[Any, ...]] = {}
    for node in NODES:
        engine = create_async_engine(node_url(database, node), poolclass=sa.pool.NullPool)
        try:
            async with engine.connect() as conn:
                await conn.execute(sa.text("SET SESSION wsrep_sync_wait = 1"))
                row: tuple[Any, ...] = ()
                for table, key in (
                    (execution.inputs, execution.inputs.c.InputID),
                    (execution.parcels, execution.parcels.c.ParcelID),
                ):
                    digest = sa.func.sum(
                        sa.func.crc32(sa.func.concat(sa.func.hex(key), table.c.Status))
                    )
                    found = await conn.execute(
                        sa.select(sa.func.count(), digest).where(
                            table.c.TransformationID.in_(members)
                        )
                    )
                    row += tuple(found.one())
                seen[node] = row
        finally:
            await engine.dispose()
    if len(set(seen.values())) == 1:
        return []
    return [f"the nodes hold different rows: {seen}"]


@dataclass
class GaleraRun:
    run: chaos.Run
    quorum_hold_s: float = QUORUM_HOLD_S

    async def one(self, fault: str) -> GaleraReport:
        database = self.run.database
        report = GaleraReport(fault, seeds=self.run.seeds)
        workgraph_id = await self.run.submit()
        members: list[bytes] = []

        async def started() -> bool:
            members[:] = await chaos._members(database, workgraph_id)
            return await chaos._terminal_inputs(database, members) >= self.run.seeds // 5

        await _until("a fifth of the seeds processed", started, chaos.PROGRESS_TIMEOUT_S)
        before = await chaos._terminal_inputs(database, members)
        injected_at = time.monotonic()
        report.injected, end = await asyncio.to_thread(inject, fault)

        async def completed() -> bool:
            return await chaos._status(database, workgraph_id) == WorkgraphStatus.COMPLETED

        def moved_past(count: list[int]) -> Callable[[], Awaitable[bool]]:
            async def moved() -> bool:
                now = await chaos._terminal_inputs(database, members)
                return now > count[0] or await completed()

            return moved

        try:
            if fault == "quorum":
                await asyncio.sleep(self.quorum_hold_s)
                survivor = await asyncio.to_thread(
                    lambda: next(n for n in NODES if node_state(n) != "down")
                )
                report.ended = await asyncio.to_thread(end)
                ended_at = time.monotonic()
                # Read on the survivor itself, at once: HAProxy sends it nothing until two
                # checks have passed, so this is what was committed while no node was primary.
                after = await terminal_on(database, survivor, members)
                report.terminal_while_down = after - before
                await _until("progress after quorum", moved_past([after]), STALL_TIMEOUT_S)
                report.stall_s = round(time.monotonic() - injected_at, 2)
                report.recover_s = round(time.monotonic() - ended_at, 2)
                report.ended += "; " + await asyncio.to_thread(rejoin_all)
            else:
                await _until("progress after the fault", moved_past([before]), STALL_TIMEOUT_S)
                report.stall_s = round(time.monotonic() - injected_at, 2)
                now = await _wait_value(terminal, database, members)
                report.ended = await asyncio.to_thread(end)
                ended_at = time.monotonic()
                await _until("progress after the rejoin", moved_past([now]), STALL_TIMEOUT_S)
                report.recover_s = round(time.monotonic() - ended_at, 2)
            await _until("Completed", completed, self.run.complete_timeout_s)
            report.complete_s = round(time.monotonic() - injected_at, 2)
        except TimeoutError as error:
            report.problems.append(str(error))
        await asyncio.to_thread(wait_synced)
        report.problems += await chaos.check(database, workgraph_id)
        report.problems += await nodes_agree(database, members)
        report.survived = not report.problems
        return report


async def _wait_value(
    read: Callable[[Database, Sequence[bytes]], Awaitable[int | None]],
    database: Database,
    members: Sequence[bytes],
) -> int:
    deadline = time.monotonic() + STALL_TIMEOUT_S
    while time.monotonic() < deadline:
        value = await read(database, members)
        if value is not None:
            return value
        await asyncio.sleep(chaos.PACE_S)
    raise TimeoutError(f"the database did not answer for {STALL_TIMEOUT_S:.0f} s")


async def run_suite(
    directory: Path,
    *,
    db_url: str,
    seeds: int,
    faults: Sequence[str] = FAULTS,
    quorum_hold_s: float = QUORUM_HOLD_S,
    emit: Callable[[dict[str, Any]], None] = lambda line: print(json.dumps(line), flush=True),
) -> list[GaleraReport]:
    """Every fault of `faults` in turn on one cluster over a scratch database on the Galera
    cluster behind `db_url`; each report emitted as it is known, then a summary."""
    await asyncio.to_thread(wait_synced)
    reports = []
    async with scratch_database(db_url) as database:
        url = database.engine.url.render_as_string(hide_password=False)
        cluster = LocalCluster(
            directory,
            db_url=url,
            backends=[Backend("null", env=chaos.NULL_ENV)],
            env=fast_pacing(chaos.PACE_S),
            migrate=False,
            replicas={"dispatcher": len(chaos.DISPATCHERS)},
        )
        await asyncio.to_thread(cluster.__enter__)
        token = cluster.token("chaos", "operator", ["operator", "user"])
        opened = channel(cluster.addresses["definition"], token=token)
        try:
            stub = definition_pb2_grpc.DefinitionServiceStub(opened)
            run = GaleraRun(chaos.Run(cluster, database, stub, seeds), quorum_hold_s)
            for fault in faults:
                try:
                    report = await run.one(fault)
                except (RuntimeError, TimeoutError, sa.exc.DBAPIError, Unavailable) as error:
                    report = GaleraReport(fault, seeds=seeds, problems=[repr(error)])
                    await asyncio.to_thread(_restore_all)
                reports.append(report)
                emit(asdict(report))
        finally:
            await opened.close()
            await asyncio.to_thread(cluster.stop)
            # Its pooled connections were cut at the failovers: the scratch schema is dropped
            # on new ones.
            await database.engine.dispose()
    emit(
        {
            "faults_injected": len(reports),
            "survived": sum(r.survived for r in reports),
            "failed": [r.fault for r in reports if not r.survived],
            "seeds": seeds,
        }
    )
    return reports


def _restore_all() -> None:
    """After a fault that went wrong: every node started again, so the next fault starts whole."""
    galera("start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos --galera", description=__doc__)
    parser.add_argument("--seeds", type=int, default=1000, help="seeds per workgraph")
    parser.add_argument(
        "--db-url", default=DEFAULT_URL, help=f"HAProxy in front of the cluster ({DEFAULT_URL})"
    )
    parser.add_argument("--fault", action="append", choices=FAULTS, help="(default: all)")
    parser.add_argument("--quorum-hold-s", type=float, default=QUORUM_HOLD_S)
    parser.add_argument("--keep", action="store_true", help="keep the cluster's logs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    directory = Path(tempfile.mkdtemp(prefix="dxts-chaos-galera-"))
    try:
        reports = asyncio.run(
            run_suite(
                directory,
                db_url=args.db_url,
                seeds=args.seeds,
                faults=args.fault or FAULTS,
                quorum_hold_s=args.quorum_hold_s,
            )
        )
    finally:
        if args.keep:
            print(f"logs: {directory / 'logs'}", file=sys.stderr)
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return 0 if all(r.survived for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
