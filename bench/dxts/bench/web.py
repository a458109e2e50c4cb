"""`web`: how long dxts-web takes to serve its heaviest pages.

Every component `dxts up` composes is served (without its sweeps) over the benchmark's
database, and dxts-web's app is called in-process over HTTP (httpx's ASGI transport), signed in
as the workgraph's owner. Seeded, untimed:

* a workgraph of `members` members (definition's benchmark chain, submitted and started
  through the definition service);
* its first member given `inputs` inputs (Processed, Failed, Problematic and Unassigned, settled
  over the last hour) and `parcels` ended parcels with a measured usage and outcome (a few
  percent Failed with a handful of reasons), plus a few in flight, journalled as execution
  would; then `failures` more Failed parcels, failed over the last day, their messages naming
  one of 100 worker nodes (so the grouping folds 100 wordings of each reason into one group);
* `workgraphs` more one-step workgraphs, submitted (New) beside it, for the list.

Figures (milliseconds per page, lower is better), each against a baseline of the same page's
gRPC reads alone (the data the page gathers, without HTTP and templating), so the ratio is
the cost of rendering:

* `workgraph_page_ms`: GET /workgraphs/WG (graph layout, counts, reasons, log);
* `member_page_ms`: GET /transformations/TF of the member with `inputs` inputs;
* `list_page_ms`: GET /workgraphs (`workgraphs` + 1 of them, progress counted over every
  member);
* `errors_page_ms`: GET /errors?wg=WG (GroupFailures over every member, over its
  `failures` + a few percent of `parcels` failed parcels);
* `parcel_page_ms`: GET /parcels/P of a failed parcel of the big member (GetParcel, its
  member; no dispatcher is served here, so no logs are asked for).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from dxts.bench.definition import chain_document
from dxts.bench.harness import Bench, Operation
from dxts.bench.seeding import utc_now
from dxts.cli.up import compose
from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.component import settle_heap
from dxts.core.counters import journal_inputs, journal_parcels
from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition
from dxts.core.grpc import DevKeys
from dxts.core.ids import hash_from_str, id_from_str, id_to_str, new_ids
from dxts.core.schema import execution
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.v1 import common_pb2, definition_pb2
from dxts.web import errors, members, parcels, workgraphs
from dxts.web.app import Web, build_app
from dxts.web.settings import WebSettings

RC = Isolation.READ_COMMITTED
SEED_BATCH = 10_000
# How the seeded inputs settle, per 1000 (the rest stay Unassigned).
INPUT_SHARES = {
    InputStatus.PROCESSED: 700,
    InputStatus.FAILED: 20,
    InputStatus.PROBLEMATIC: 5,
    InputStatus.ASSIGNED: 25,
}
FAILURES = ("exit code 137 (killed: out of memory)", "stage-out to LOCAL-DISK timed out")
IN_FLIGHT = 200


@dataclass(frozen=True)
class WebParams:
    members: int
    inputs: int
    parcels: int
    rounds: int
    failures: int = 0
    workgraphs: int = 0


SCALES = {
    "tiny": WebParams(members=5, inputs=2_000, parcels=200, rounds=2, failures=300, workgraphs=5),
    "small": WebParams(
        members=50,
        inputs=1_000_000,
        parcels=20_000,
        rounds=5,
        failures=100_000,
        workgraphs=1_000,
    ),
    "full": WebParams(
        members=50,
        inputs=1_000_000,
        parcels=100_000,
        rounds=20,
        failures=100_000,
        workgraphs=1_000,
    ),
}
SUBMIT_SIDE_BY_SIDE = 8


async def run(bench: Bench, params: WebParams) -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    async with served(bench.database) as (web, token):
        workgraph, member = await seed(bench.database, web, token, params)
        failed = await _a_failed_parcel(bench.database, member)
        session = web.sessions.open(token)
        clients = web.clients(session)
        app = build_app(web)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://bench",
            cookies={"dxts_session": session.id},
        ) as http:
            shared = {
                "members": params.members,
                "inputs": params.inputs,
                "parcels": params.parcels,
                "failures": params.failures,
                "workgraphs": params.workgraphs + 1,
                "baseline": "the page's gRPC reads alone (no HTTP, no templates)",
            }
            pages: list[tuple[str, str, Callable[[], Awaitable[Any]]]] = [
                (
                    "workgraph_page_ms",
                    f"/workgraphs/{workgraph}",
                    lambda: workgraphs.workgraph_page(clients, workgraph),
                ),
                (
                    "member_page_ms",
                    f"/transformations/{member}",
                    lambda: members.member_page(clients, member, _aware_now()),
                ),
                (
                    "list_page_ms",
                    "/workgraphs",
                    lambda: workgraphs.list_workgraphs(clients, workgraphs.Filters()),
                ),
                (
                    "errors_page_ms",
                    f"/errors?wg={workgraph}",
                    lambda: errors.errors_page(clients, "", workgraph),
                ),
                (
                    "parcel_page_ms",
                    f"/parcels/{failed}",
                    lambda: parcels.parcel_page(clients, failed, _aware_now()),
                ),
            ]
            for figure, path, reads in pages:
                await bench.compare(
                    figure,
                    unit="ms",
                    baseline=Operation(_once(reads)),
                    subject=Operation(_once(_get(http, path))),
                    rounds=params.rounds,
                    params={**shared, "page": path.split("/")[1]},
                    latency=True,
                )


def _once(call: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[int]]:
    async def one() -> int:
        await call()
        return 1

    return one


def _get(http: httpx.AsyncClient, path: str) -> Callable[[], Awaitable[Any]]:
    async def get() -> None:
        reply = await http.get(path)
        if reply.status_code != 200:
            raise FailedPrecondition(f"GET {path} answered {reply.status_code}")

    return get


def _aware_now() -> datetime:
    return datetime.now(UTC)


@contextlib.asynccontextmanager
async def served(database: Database) -> AsyncIterator[tuple[Web, str]]:
    with tempfile.TemporaryDirectory(prefix="dxts-bench-web-") as scratch:
        data_dir = Path(scratch)
        keys = DevKeys.load_or_create(data_dir)
        catalogue = await open_catalogue(
            CatalogueSettings(url=f"sqlite+aiosqlite:///{data_dir / 'catalogue.sqlite'}")
        )
        stack = await compose(
            database,
            data_dir=data_dir,
            verifier=keys.verifier(),
            catalogue=catalogue,
            sweeps=False,
        )
        web = Web(
            WebSettings(
                definition_address=stack.address("definition"),
                execution_address=stack.address("execution"),
                accounting_address=stack.address("accounting"),
            )
        )
        settle_heap()  # as `dxts up` does once it has started
        try:
            yield web, keys.issue("bench", "bench", ["operator", "user"])
        finally:
            await web.services.close()
            await stack.stop()
            await catalogue.close()


async def seed(database: Database, web: Web, token: str, params: WebParams) -> tuple[str, str]:
    """The workgraph (submitted and started as its owner) and its first member's id, with
    that member's inputs and parcels inserted and journalled."""
    clients = web.services.as_user(token)
    document = chain_document(params.members, "web")
    submitted = await clients.definition.SubmitWorkgraph(
        definition_pb2.SubmitWorkgraphRequest(
            request_id=str(uuid.uuid4()),
            bundle=common_pb2.DocumentBundle(
                main_path="workgraph.cwl", files={"workgraph.cwl": document.encode()}
            ),
        )
    )
    workgraph = submitted.workgraph_id
    await clients.definition.StartWorkgraph(
        definition_pb2.StartWorkgraphRequest(request_id=str(uuid.uuid4()), workgraph_id=workgraph)
    )
    got = await clients.definition.GetWorkgraph(
        definition_pb2.GetWorkgraphRequest(workgraph_id=workgraph)
    )
    first = next(m for m in got.members if not m.upstream_transformation_ids)
    await _seed_inputs(database, id_from_str(first.transformation_id), params.inputs)
    await _seed_parcels(
        database,
        id_from_str(first.transformation_id),
        hash_from_str(first.process_id),
        params.parcels,
    )
    await _seed_failures(
        database,
        id_from_str(first.transformation_id),
        hash_from_str(first.process_id),
        params.failures,
    )
    await _submit_others(clients, params.workgraphs)
    return workgraph, first.transformation_id


async def _submit_others(clients: Any, count: int) -> None:
    """`count` one-step workgraphs, SUBMIT_SIDE_BY_SIDE submissions at a time."""

    async def submit(n: int) -> None:
        await clients.definition.SubmitWorkgraph(
            definition_pb2.SubmitWorkgraphRequest(
                request_id=str(uuid.uuid4()),
                bundle=common_pb2.DocumentBundle(
                    main_path="workgraph.cwl",
                    files={"workgraph.cwl": chain_document(1, f"web-list-{n}").encode()},
                ),
            )
        )

    for start in range(0, count, SUBMIT_SIDE_BY_SIDE):
        await asyncio.gather(
            *(submit(n) for n in range(start, min(count, start + SUBMIT_SIDE_BY_SIDE)))
        )


async def _a_failed_parcel(database: Database, member: str) -> str:
    parcels_table = execution.parcels
    async with database.transaction(RC) as conn:
        found = await conn.scalar(
            sa.select(parcels_table.c.ParcelID)
            .where(
                parcels_table.c.TransformationID == id_from_str(member),
                parcels_table.c.Status == ParcelStatus.FAILED.value,
            )
            .limit(1)
        )
    if found is None:
        raise FailedPrecondition("the seeding made no failed parcel")
    return id_to_str(bytes(found))


def _input_status(number: int) -> InputStatus:
    slot = number % 1000
    for status, share in INPUT_SHARES.items():
        if slot < share:
            return status
        slot -= share
    return InputStatus.UNASSIGNED


async def _seed_inputs(database: Database, transformation_id: bytes, count: int) -> None:
    now = utc_now()
    for start in range(0, count, SEED_BATCH):
        size = min(SEED_BATCH, count - start)
        rows = []
        moves: dict[tuple[bytes, str | None, str | None], int] = {}
        for n, input_id in enumerate(new_ids(size), start=start):
            status = _input_status(n).value
            rows.append(
                {
                    "TransformationID": transformation_id,
                    "InputID": input_id,
                    "InputHash": n.to_bytes(16, "big"),
                    "LFN": f"/bench/web/{n:08d}.sim",
                    "LFNSize": 1_000_000 + n,
                    "Descriptor": None,
                    "Status": status,
                    "UpdatedAt": now - timedelta(seconds=3600 * (count - n) / count),
                }
            )
            key = (transformation_id, None, status)
            moves[key] = moves.get(key, 0) + 1
        async with database.transaction(RC) as conn:
            await conn.execute(sa.insert(execution.inputs), rows)
            await journal_inputs(conn, moves)


async def _seed_failures(
    database: Database, transformation_id: bytes, process_id: bytes, count: int
) -> None:
    """`count` Failed parcels, failed over the last day, each naming its worker node."""
    now = utc_now()
    for start in range(0, count, SEED_BATCH):
        size = min(SEED_BATCH, count - start)
        rows = []
        for n, parcel_id in enumerate(new_ids(size), start=start):
            at = now - timedelta(seconds=86_400 * (count - n) / count)
            message = f"{FAILURES[n % len(FAILURES)]} on wn-{n % 100:03d}"
            outcome = {
                "result": "OUTCOME_RESULT_FAILED",
                "backend": "local",
                "identifier": f"failed-job-{n}",
                "message": message,
                "exit_code": 137 if n % len(FAILURES) == 0 else 1,
            }
            rows.append(
                {
                    "ParcelID": parcel_id,
                    "TransformationID": transformation_id,
                    "Kind": Kind.COMPUTE.value,
                    "Status": ParcelStatus.FAILED.value,
                    "Backend": "local",
                    "Annotations": {"outcome": outcome, "reason": message},
                    "UpdatedAt": at,
                    "CompletedAt": at,
                }
            )
        async with database.transaction(RC) as conn:
            await conn.execute(sa.insert(execution.parcels), rows)
            await conn.execute(
                sa.insert(execution.compute_parcels),
                [{"ParcelID": r["ParcelID"], "ProcessID": process_id} for r in rows],
            )
            moves: dict[tuple[bytes, str | None, str | None], int] = {
                (transformation_id, None, ParcelStatus.FAILED.value): size
            }
            await journal_parcels(conn, moves)


async def _seed_parcels(
    database: Database, transformation_id: bytes, process_id: bytes, count: int
) -> None:
    """`count` ended parcels (Done, a few Failed) with a measured usage and an outcome, then
    IN_FLIGHT Assigned ones."""
    now = utc_now()
    randoms = random.Random(19)
    total = count + IN_FLIGHT
    for start in range(0, total, SEED_BATCH):
        size = min(SEED_BATCH, total - start)
        rows = []
        moves: dict[tuple[bytes, str | None, str | None], int] = {}
        for n, parcel_id in enumerate(new_ids(size), start=start):
            if n >= count:
                status, annotations = ParcelStatus.ASSIGNED, None
            else:
                failed = n % 25 == 0
                status = ParcelStatus.FAILED if failed else ParcelStatus.DONE
                cpu = randoms.lognormvariate(4.0, 0.4)
                usage = {
                    "cpu_seconds": cpu,
                    "wall_seconds": cpu * randoms.uniform(1.05, 1.6),
                    "max_memory_bytes": int(randoms.gauss(1.5e9, 2e8)),
                }
                outcome = {
                    "result": "OUTCOME_RESULT_FAILED" if failed else "OUTCOME_RESULT_SUCCEEDED",
                    "backend": "local",
                    "identifier": f"job-{n}",
                    "message": FAILURES[n % len(FAILURES)] if failed else "",
                    "usage": usage,
                }
                annotations = {
                    "outcome": outcome,
                    "usage": {
                        "cpu_hours": cpu / 3600,
                        "wall_hours": usage["wall_seconds"] / 3600,
                        "memory_gb": usage["max_memory_bytes"] / 1e9,
                    },
                }
            rows.append(
                {
                    "ParcelID": parcel_id,
                    "TransformationID": transformation_id,
                    "Kind": Kind.COMPUTE.value,
                    "Status": status.value,
                    "Backend": "local",
                    "Annotations": annotations,
                    "UpdatedAt": now,
                    "CompletedAt": now if annotations else None,
                }
            )
            key = (transformation_id, None, status.value)
            moves[key] = moves.get(key, 0) + 1
        async with database.transaction(RC) as conn:
            await conn.execute(sa.insert(execution.parcels), rows)
            await conn.execute(
                sa.insert(execution.compute_parcels),
                [{"ParcelID": r["ParcelID"], "ProcessID": process_id} for r in rows],
            )
            await journal_parcels(conn, moves)
