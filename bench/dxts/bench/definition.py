"""`definition`: submitting a workgraph (`submit_workgraph`) against the plain INSERTs it makes.

The documents are generated: a chain of `steps` steps fed by a Seeds workflow input, step 1
packed PerInput, every later step fed by the edge from the one before and packed BySize, each
step running an inline CommandLineTool. Every tool body differs from every other, per step and
per submission (a per-submission tag in its `doc`), so every submission stores `steps` new
Processes rows, as a first submission of a production does. Documents are YAML text, written
(untimed) before each round.

Figures, for each workgraph size (`params.steps`), measured against a plain-SQL baseline in the
same run:

* `submit_ms_p50` and `submit_ms_p99`: the latency of one submission, one submission per round,
  one connection, nothing else running; the median (`Bench.compare`'s figure) and the p99 (nearest
  rank, from the same rounds, each also timed inside the operation) of `submissions` rounds.
  dxts: `submit_workgraph` (load and validate the bundle in a thread, resolve references,
  compile, insert every row and the log rows in one READ COMMITTED transaction). Baseline: the
  same rows, built (untimed) from a plan compiled once per size with fresh ids and process keys,
  inserted by hand-written Core statements (one `INSERT ... VALUES` per table: Processes,
  Workgraphs, Ownership, Transformations, ComputeTransformations, TransformationOutputs,
  Actions, WorkgraphLog, TransformationLog) in one READ COMMITTED transaction, with one
  timestamp computed in Python. So the ratio is the cost of validation and compilation (and
  dxts's extra reads) over the writes themselves.
* `submit_per_s`: submissions per second with `concurrency` concurrent submitters sharing
  `throughput_submissions` submissions per round, against the same number of baseline
  transactions at the same concurrency.

After each size the benchmark counts the workgraphs and transformations each side created and
fails if any submission is missing.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
import yaml

from dxts.bench.harness import Bench, Figure, Operation
from dxts.core.config import DefinitionConfig
from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition
from dxts.core.ids import id_to_str
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.plugins.registry import Registry
from dxts.core.schema import accounting, definition
from dxts.core.states import TransformationStatus, WorkgraphStatus
from dxts.cwl.compile import Plan, compile_plan
from dxts.cwl.loading import Bundle, load_document
from dxts.cwl.validation import validate
from dxts.definition.logic.submit import submit_workgraph
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer

RC = Isolation.READ_COMMITTED
VO, SUB = "bench", "bench"
# Workgraphs.Type (and the members' Type) of each side, suffixed with the step count, so that
# each side's rows of each size can be counted.
SUBMITTED_TYPE = "BenchChain"
PLAIN_TYPE = "BenchPlain"
MAIN = "workgraph.cwl"
TOOLS = (
    "an inline CommandLineTool per step, its body distinct per step and per submission "
    "(a new Processes row for every step of every submission)"
)
BASELINE = "the same rows by hand-written INSERTs, one per table, one READ COMMITTED transaction"


@dataclass(frozen=True)
class DefinitionParams:
    steps: tuple[int, ...]  # workgraph sizes, one set of figures each
    submissions: int  # latency rounds per size, one submission each
    throughput_submissions: int  # submissions per throughput round
    concurrency: int  # concurrent submitters in a throughput round
    throughput_rounds: int


SCALES = {
    "tiny": DefinitionParams((3, 5), 3, 4, 2, 1),
    "small": DefinitionParams((3, 50), 40, 12, 4, 2),
    "full": DefinitionParams((3, 50), 200, 20, 4, 5),
}


async def run(bench: Bench, params: DefinitionParams) -> None:
    catalogue = Registry.discover()
    for steps in params.steps:
        await _figures(bench, params, steps, catalogue)


async def _figures(bench: Bench, params: DefinitionParams, steps: int, catalogue: Registry) -> None:
    database, config = bench.database, DefinitionConfig()
    documents = bundles(steps)
    fresh_plan = fresh_plans(steps, catalogue, config)

    def plain_rows() -> Rows:
        return plan_rows(fresh_plan(), f"{PLAIN_TYPE}{steps}")

    submit = _submitter(database, steps, catalogue, config)

    async def plain(rows: Rows) -> None:
        await insert_rows(database, rows)

    timed_submit, submit_times = _timed(submit)
    timed_plain, plain_times = _timed(plain)
    shared = {"steps": steps, "tools": TOOLS, "baseline": BASELINE}
    median = await bench.compare(
        "submit_ms_p50",
        unit="ms",
        baseline=_one_each(timed_plain, plain_rows),
        subject=_one_each(timed_submit, lambda: next(documents)),
        rounds=params.submissions,
        params={**shared, "statistic": "median"},
        latency=True,
    )
    _report_p99(bench, median, submit_times, plain_times)
    await bench.compare(
        "submit_per_s",
        unit="submissions/s",
        baseline=_concurrently(plain, params, plain_rows),
        subject=_concurrently(submit, params, lambda: next(documents)),
        rounds=params.throughput_rounds,
        params={
            **shared,
            "concurrency": params.concurrency,
            "submissions_per_round": params.throughput_submissions,
        },
    )
    latency_calls = params.submissions + 1  # compare's warm-up round included
    calls = latency_calls + params.throughput_submissions * (params.throughput_rounds + 1)
    await check_created(database, steps, calls)


# -- the documents ----------------------------------------------------------------------------


def bundles(steps: int) -> Iterator[Bundle]:
    """An endless supply of distinct bundles of a `steps`-step chain (distinct from every other
    supply's too: the tags start with a random prefix)."""
    prefix = secrets.token_hex(4)
    for number in itertools.count(1):
        yield Bundle.from_mapping(MAIN, {MAIN: chain_document(steps, f"{prefix}-{number}")})


def chain_document(steps: int, tag: str) -> str:
    """A Seeds-fed chain of `steps` inline tools as YAML; `tag` makes every tool body unique."""
    any_input = {"type": "array", "items": ["File", "string"]}
    document: dict[str, Any] = {
        "cwlVersion": "v1.2",
        "class": "Workflow",
        "id": f"bench-chain-{steps}",
        "$namespaces": {"dirac": "https://diracgrid.org/cwl#"},
        "hints": {"dirac:Workgraph": {"schema_version": "1.0", "type": f"{SUBMITTED_TYPE}{steps}"}},
        "inputs": {
            "events": {
                "dirac:Feeder": {
                    "name": "Seeds",
                    "args": {"target_events": 1_000_000, "events_per_seed": 1_000},
                },
                "type": any_input,
            }
        },
        "steps": {},
    }
    source = "events"
    for number in range(1, steps + 1):
        name = f"Step{number:03d}"
        packer: dict[str, Any] = (
            {"name": "PerInput"} if number == 1 else {"name": "BySize", "args": {"group_size": 2}}
        )
        document["steps"][name] = {
            "hints": {"dirac:Transformation": {"packer": packer}},
            "run": {
                "class": "CommandLineTool",
                "doc": f"benchmark tool {tag} of step {number}",
                "baseCommand": ["true", f"step-{number}"],
                "inputs": {"input-data": {"type": any_input if number == 1 else "File[]"}},
                "outputs": {
                    "out": {"type": "File[]", "outputBinding": {"glob": f"*.step{number}"}}
                },
            },
            "in": {"input-data": source},
            "out": ["out"],
        }
        source = f"{name}/out"
    document["outputs"] = {"result": {"outputSource": source, "type": "File[]"}}
    return yaml.safe_dump(document, sort_keys=False)


# -- the operations ---------------------------------------------------------------------------

Submit = Callable[[Any], Awaitable[None]]
Rows = list[tuple[sa.Table, list[dict[str, Any]]]]


def _timed(operation: Submit) -> tuple[Submit, list[float]]:
    """`operation`, recording each call's milliseconds (for the p99 of the same rounds)."""
    times: list[float] = []

    async def timed(item: Any) -> None:
        started = time.perf_counter()
        await operation(item)
        times.append((time.perf_counter() - started) * 1000)

    return timed, times


def _report_p99(
    bench: Bench, median: Figure, submit_times: list[float], plain_times: list[float]
) -> None:
    """Print `submit_ms_p99` of the rounds `median` was measured on (its params, its run)."""
    rounds = median.params["rounds"]
    rank = math.ceil(0.99 * rounds)
    p99 = replace(
        median,
        figure="submit_ms_p99",
        value=_nearest_rank(submit_times, rounds, rank),
        baseline=_nearest_rank(plain_times, rounds, rank),
        params={**median.params, "statistic": f"p99, nearest rank ({rank} of {rounds})"},
    )
    bench.figures.append(p99)
    print(p99.as_json(), file=bench.out, flush=True)


def _nearest_rank(times: list[float], rounds: int, rank: int) -> float:
    """The `rank`-th smallest of the timed rounds (compare's warm-up call, the first, left out)."""
    if len(times) != rounds + 1:
        raise FailedPrecondition(f"{len(times)} timed calls for {rounds} rounds and a warm-up")
    return float(f"{sorted(times[1:])[rank - 1]:.4g}")


def _submitter(
    database: Database, steps: int, catalogue: Registry, config: DefinitionConfig
) -> Submit:
    async def submit(bundle: Bundle) -> None:
        with serving(rpc(DefinitionServiceServicer.SubmitWorkgraph)):
            submitted = await submit_workgraph(
                database, bundle, vo=VO, sub=SUB, catalogue=catalogue, config=config
            )
        if len(submitted.plan.members) != steps:
            raise FailedPrecondition(
                f"a {steps}-step submission created {len(submitted.plan.members)} members"
            )

    return submit


def _one_each(operation: Submit, make: Callable[[], Any]) -> Operation:
    """One call per round, its argument made in the untimed setup."""
    held: list[Any] = []

    async def setup() -> None:
        held[:] = [make()]

    async def once() -> int:
        await operation(held[0])
        return 1

    return Operation(once, setup)


def _concurrently(
    operation: Submit, params: DefinitionParams, make: Callable[[], Any]
) -> Operation:
    """`throughput_submissions` calls per round shared by `concurrency` tasks."""
    held: list[Any] = []

    async def setup() -> None:
        held[:] = [make() for _ in range(params.throughput_submissions)]

    async def all_of_them() -> int:
        pending = iter(held)

        async def worker() -> None:
            for item in pending:
                await operation(item)

        await asyncio.gather(*(worker() for _ in range(params.concurrency)))
        return len(held)

    return Operation(all_of_them, setup)


# -- the baseline -----------------------------------------------------------------------------


def fresh_plans(steps: int, catalogue: Registry, config: DefinitionConfig) -> Callable[[], Plan]:
    """Fresh plans of one `steps`-step document: new ids each call (compile mints them)."""
    document, problems = load_document(next(bundles(steps)))
    checked = validate(document, problems, catalogue=catalogue, config=config, vo=VO)
    if not checked.ok or checked.document is None or checked.analysis is None:
        raise FailedPrecondition(f"the {steps}-step document does not validate: {checked.problems}")
    loaded, analysis = checked.document, checked.analysis

    def plan() -> Plan:
        return compile_plan(loaded, analysis, config=config, vo=VO, sub=SUB)

    return plan


async def insert_rows(database: Database, rows: Rows) -> None:
    """The baseline: what a submission writes, as plain INSERTs of rows built beforehand.

    The executemany form, which asyncmy sends as one multi-row INSERT per table (the bulk
    recipe measured by `raw`), skipping SQLAlchemy's compilation of a multi-row VALUES."""
    async with database.transaction(RC) as conn:
        for table, batch in rows:
            if batch:
                await conn.execute(sa.insert(table), batch)


def plan_rows(plan: Plan, kind: str) -> Rows:
    """A plan's rows, table by table in dependency order, with new random process keys (the
    plans share their bodies, and the keys are content hashes on the dxts side)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    keys = {p.process_id: secrets.token_bytes(32) for p in plan.processes}
    created = {"vo": VO, "workgraph": id_to_str(plan.workgraph_id)}
    log = {"EventType": "StateChange", "Author": SUB, "OldStatus": None, "CreatedAt": now}
    members = plan.members
    return [
        (
            definition.processes,
            [
                {"ProcessID": keys[p.process_id], "Process": p.body, "CreatedAt": now}
                for p in plan.processes
            ],
        ),
        (
            definition.workgraphs,
            [
                {
                    "WorkgraphID": plan.workgraph_id,
                    "Type": kind,
                    "Status": WorkgraphStatus.NEW.value,
                    "StrippedSpec": plan.stripped_spec,
                    "Annotations": plan.annotations or None,
                    "Hooks": plan.hooks,
                    "UpdatedAt": now,
                }
            ],
        ),
        (
            definition.ownership,
            [
                {
                    "OwnershipID": plan.ownership_id,
                    "VO": VO,
                    "Sub": SUB,
                    "WorkgraphID": plan.workgraph_id,
                }
            ],
        ),
        (
            definition.transformations,
            [
                {
                    "TransformationID": m.transformation_id,
                    "OwnershipID": plan.ownership_id,
                    "ExecutingIdentity": m.executing_identity,
                    "Type": kind,
                    "Kind": m.kind,
                    "Status": TransformationStatus.NEW.value,
                    "Feeder": m.feeder,
                    "FeederArgs": m.feeder_args,
                    "FeederEnabled": True,
                    "Packer": m.packer,
                    "PackerArgs": m.packer_args,
                    "Annotations": m.annotations,
                    "Hooks": m.hooks,
                    "UpdatedAt": now,
                }
                for m in members
            ],
        ),
        (
            definition.compute_transformations,
            [
                {
                    "TransformationID": m.transformation_id,
                    "ProcessID": keys[m.process_id],
                    "RequirementsTemplateID": None,
                }
                for m in members
                if m.process_id is not None
            ],
        ),
        (
            definition.transformation_outputs,
            [
                {
                    "TransformationOutputID": o.output_id,
                    "TransformationID": m.transformation_id,
                    "Name": o.name,
                    "Intermediate": o.intermediate,
                }
                for m in members
                for o in m.outputs
            ],
        ),
        (
            definition.actions,
            [
                {
                    "WorkgraphID": None,
                    "TransformationID": m.transformation_id,
                    "State": a.state,
                    "Position": a.position,
                    "Action": a.action,
                    "Args": a.args,
                }
                for m in members
                for a in m.actions
            ],
        ),
        (
            accounting.workgraph_log,
            [
                {
                    **log,
                    "WorkgraphID": plan.workgraph_id,
                    "NewStatus": WorkgraphStatus.NEW.value,
                    "Message": "submitted",
                    "Data": created,
                }
            ],
        ),
        (
            accounting.transformation_log,
            [
                {
                    **log,
                    "TransformationID": m.transformation_id,
                    "NewStatus": TransformationStatus.NEW.value,
                    "Message": f"created as member {m.name}",
                    "Data": created,
                }
                for m in members
            ],
        ),
    ]


# -- the check --------------------------------------------------------------------------------


async def check_created(database: Database, steps: int, calls: int) -> None:
    """Every call of either side created its workgraph and all its members, or fail."""
    workgraphs, transformations = definition.workgraphs, definition.transformations
    async with database.transaction(RC) as conn:
        for kind in (f"{SUBMITTED_TYPE}{steps}", f"{PLAIN_TYPE}{steps}"):
            graphs = await conn.scalar(
                sa.select(sa.func.count()).select_from(workgraphs).where(workgraphs.c.Type == kind)
            )
            members = await conn.scalar(
                sa.select(sa.func.count())
                .select_from(transformations)
                .where(transformations.c.Type == kind)
            )
            if (graphs, members) != (calls, calls * steps):
                raise FailedPrecondition(
                    f"{kind}: {graphs} workgraphs and {members} transformations after {calls} "
                    f"submissions of {steps} steps (expected {calls} and {calls * steps})"
                )
