"""Property-based runs (hypothesis, on SQLite): random programs of feeds, packings, outcomes
(SPLIT and NOT_TRIED reports, missing and invalid reports, failures, cancellations, repeats),
recordings, HandleFailedInput decisions, operator resets, write-offs and cancellations. After
every step:

* every input is in exactly one state, and one that reached a terminal state stays there;
* every Processed input was processed successfully exactly once — by the parcel it names as its
  last, a Done or PartiallyDone parcel that carried it, or a born-Done recovery parcel — and no
  other input ever was (the test keeps its own tally of what it reported);
* no input is Assigned to two live parcels; an Assigned input is carried by exactly one live
  parcel, the one it names;
* the counters equal COUNT(*).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recording_world import (
    RC,
    World,
    assert_counters_exact,
    definitions,
    feed,
    outcome,
    pack,
    transformation,
)

from dxts.core.catalogue import CataloguePage, FileCatalogue, Registered
from dxts.core.counters import ensure_lock_rows, journal_inputs
from dxts.core.db import Database
from dxts.core.ids import id_to_str
from dxts.core.plugins import (
    Input,
    InputRecord,
    Registry,
    SplitInto,
    ToProblematic,
    ToUnassigned,
    hook,
)
from dxts.core.schema import execution, metadata
from dxts.core.state_machines import INPUT, LIVE_PARCEL_STATES
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic import operations
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.failed_inputs import handle_failed_inputs
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.v1 import common_pb2

SUCCEEDED = common_pb2.OUTCOME_RESULT_SUCCEEDED
FAILED = common_pb2.OUTCOME_RESULT_FAILED
CANCELLED = common_pb2.OUTCOME_RESULT_CANCELLED
ACTIONS = ("SUCCESS", "FAILURE", "NOT_TRIED", "SPLIT", "omitted")


class MemoryCatalogue(FileCatalogue):
    """Registration only: what recording needs, in memory."""

    def __init__(self) -> None:
        self.registered: dict[str, Any] = {}

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def register(self, files: Iterable[Any]) -> Registered:
        new = [f for f in files if f.lfn not in self.registered]
        self.registered.update((f.lfn, f) for f in new)
        return Registered(len(new), 0)

    async def query(self, where: Any = None, **kwargs: Any) -> CataloguePage:
        raise NotImplementedError

    async def files(self, lfns: Iterable[str]) -> dict[str, Any]:
        return {lfn: self.registered[lfn] for lfn in lfns if lfn in self.registered}

    async def replicas(self, lfns: Iterable[str]) -> dict[str, tuple[str, ...]]:
        raise NotImplementedError

    async def remove_replicas(self, replicas: Mapping[str, Iterable[str]]) -> int:
        raise NotImplementedError

    async def remove_files(self, lfns: Iterable[str]) -> int:
        raise NotImplementedError


@hook("HandleFailedInput")
def by_id(*, input: InputRecord) -> ToUnassigned | ToProblematic | SplitInto:
    """A deterministic mixture of the three decisions."""
    choice = input.id.bytes[-1] % 3
    if choice == 0:
        return ToUnassigned()
    if choice == 1:
        return ToProblematic("chosen by id")
    return SplitInto([Input(descriptor={"hooked": input.id.hex, "n": n}) for n in range(2)])


REGISTRY = Registry.of({"hook": {"ById": by_id}})
HOOKS = {"HandleFailedInput": {"hook": "ById"}}

# -- programs ------------------------------------------------------------------------------------

report_shape = st.lists(st.sampled_from(ACTIONS), min_size=3, max_size=3)
feeds = st.tuples(st.just("feed"), st.integers(1, 4))
packs = st.tuples(
    st.just("pack"),
    st.integers(1, 3),
    st.sampled_from(["Unassigned", "Reserved", "Assigned", "Assigned", "Assigned"]),
)
outcomes = st.tuples(
    st.just("outcome"),
    st.integers(0, 20),
    st.sampled_from(["report", "report", "report", "missing", "invalid", "failed", "cancel"]),
    report_shape,
    st.booleans(),  # delivered twice
    st.sampled_from([True, True, True, False]),  # recorded at once, or left Completing
)
KINDS = {
    "feed": feeds,
    "pack": packs,
    "outcome": outcomes,
    "record": st.tuples(st.just("record")),
    "failed": st.tuples(st.just("failed"), st.sampled_from([False, False, False, True])),
    "reset": st.tuples(st.just("reset"), st.booleans()),  # by statuses or by ids
    "write_off": st.tuples(
        st.just("write_off"),
        st.lists(st.sampled_from(["Unassigned", "Failed", "Problematic"]), min_size=1),
    ),
    "cancel": st.tuples(st.just("cancel"), st.integers(0, 20), st.booleans()),  # one, or all
}
# Productive steps are drawn more often than the ones that end work early.
WEIGHTS = {"feed": 3, "pack": 4, "outcome": 5, "record": 2, "failed": 2}
steps = st.sampled_from([k for k in KINDS for _ in range(WEIGHTS.get(k, 1))]).flatmap(
    lambda kind: KINDS[kind]
)


@dataclass
class Model:
    """What the test itself reported: successes per input id, or per split-child serial."""

    world: World
    successes: Counter[bytes] = field(default_factory=Counter)
    child_successes: Counter[int] = field(default_factory=Counter)
    pending: dict[bytes, tuple[list[bytes], list[int]]] = field(default_factory=dict)
    terminal: dict[bytes, str] = field(default_factory=dict)
    serial: itertools.count = field(default_factory=itertools.count)


async def rows(database: Database, table: sa.Table, **where: Any) -> list[Any]:
    async with database.transaction(RC) as conn:
        statement = sa.select(table)
        for name, value in where.items():
            statement = statement.where(table.c[name] == value)
        return list(await conn.execute(statement))


def _is_recovery(parcel: Any) -> bool:
    """A split's born-Done recovery parcel (it names the parcel it recovers)."""
    return "recovery_of" in (parcel.Annotations or {})


async def parcels_in(database: Database, world: World, *statuses: str) -> list[Any]:
    found = await rows(database, execution.parcels, TransformationID=world.transformation_id)
    return sorted(
        (p for p in found if p.Status in statuses and not _is_recovery(p)),
        key=lambda p: bytes(p.ParcelID),
    )


async def step(database: Database, catalogue: MemoryCatalogue, model: Model, op: tuple) -> None:
    world = model.world
    kind = op[0]
    if kind == "feed":
        await feed(database, world, op[1])
    elif kind == "pack":
        waiting = [
            bytes(i.InputID)
            for i in await rows(
                database, execution.inputs, TransformationID=world.transformation_id
            )
            if i.Status == "Unassigned"
        ]
        if waiting:
            await pack(database, world, [sorted(waiting)[: op[1]]], status=op[2])
    elif kind == "outcome":
        await _outcome(database, model, *op[1:5])
        if op[5]:
            await step(database, catalogue, model, ("record",))
    elif kind == "record":
        await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
        for parcel_id, (inputs, children) in list(model.pending.items()):
            (row,) = await rows(database, execution.parcels, ParcelID=parcel_id)
            if row.Status in ("Done", "PartiallyDone"):
                model.successes.update(inputs)
                model.child_successes.update(children)
            if row.Status != "Completing":
                del model.pending[parcel_id]
    elif kind == "failed":
        await handle_failed_inputs(
            database, REGISTRY, world.record(hooks=HOOKS, halted=op[1]), batch=2
        )
    elif kind == "reset":
        tid = world.transformation_id
        if op[1]:
            await operations.reset_inputs(database, tid, statuses=["Problematic"], batch=1)
        else:
            inputs = await rows(database, execution.inputs, TransformationID=tid)
            if inputs:
                ids = [bytes(i.InputID) for i in inputs]
                await operations.reset_inputs(database, tid, input_ids=ids)
    elif kind == "write_off":
        await operations.write_off_inputs(
            database, world.transformation_id, statuses=sorted(set(op[1])), batch=2
        )
    elif kind == "cancel":
        if op[2]:
            await operations.cancel_parcels(
                database,
                transformation_id=world.transformation_id,
                statuses=["Unassigned", "Reserved", "Assigned"],
                batch=1,
            )
        else:
            live = await parcels_in(database, world, "Unassigned", "Reserved", "Assigned")
            if live:
                chosen = bytes(live[op[1] % len(live)].ParcelID)
                await operations.cancel_parcels(database, parcel_ids=[chosen])


async def _outcome(
    database: Database, model: Model, index: int, how: str, shape: list[str], twice: bool
) -> None:
    """Finish one Assigned (or cancel-requested) parcel as `how` says."""
    candidates = [
        p
        for p in await parcels_in(database, model.world, "Assigned", "Completing")
        if "outcome" not in (p.Annotations or {})
    ]
    if not candidates:
        return
    parcel = candidates[index % len(candidates)]
    parcel_id = bytes(parcel.ParcelID)
    carried = sorted(
        bytes(i.InputID)
        for i in await rows(database, execution.inputs, LastParcelID=parcel_id)
        if i.Status == "Assigned"
    )
    report: dict[str, Any] = {}
    succeeded: list[bytes] = []
    children: list[int] = []
    if how == "report":
        for input_id, action in zip(carried, itertools.cycle(shape), strict=False):
            if action == "omitted":
                continue
            if action == "SPLIT":
                good, bad = next(model.serial), next(model.serial)
                report[id_to_str(input_id)] = {
                    "action": "SPLIT",
                    "SUCCESS": [{"descriptor": {"serial": good}}],
                    "FAILURE": [{"data": {"serial": bad}}],
                }
                children.append(good)
            else:
                report[id_to_str(input_id)] = {"action": action}
                if action == "SUCCESS":
                    succeeded.append(input_id)
    finished = {
        "report": lambda: outcome(parcel_id, report=report),
        "missing": lambda: outcome(parcel_id),
        "invalid": lambda: outcome(parcel_id, report="{not json"),
        "failed": lambda: outcome(parcel_id, result=FAILED),
        "cancel": lambda: outcome(parcel_id, result=CANCELLED),
    }[how]()
    await record_outcomes(database, [finished] * (2 if twice else 1))
    if how == "report":
        model.pending[parcel_id] = (succeeded, children)


# -- the invariants ------------------------------------------------------------------------------


async def check(database: Database, model: Model) -> None:
    tid = model.world.transformation_id
    inputs = {
        bytes(i.InputID): i for i in await rows(database, execution.inputs, TransformationID=tid)
    }
    parcels = {
        bytes(p.ParcelID): p for p in await rows(database, execution.parcels, TransformationID=tid)
    }
    links = await rows(database, execution.parcel_inputs, TransformationID=tid)
    carried_by: dict[bytes, list[bytes]] = {}
    for link in links:
        carried_by.setdefault(bytes(link.InputID), []).append(bytes(link.ParcelID))

    for input_id, row in inputs.items():
        assert row.Status in INPUT.states
        if input_id in model.terminal:  # terminal states are final
            assert row.Status == model.terminal[input_id], id_to_str(input_id)
        if row.Status in INPUT.terminal:
            model.terminal[input_id] = row.Status
        live = [p for p in carried_by.get(input_id, []) if parcels[p].Status in LIVE_PARCEL_STATES]
        assert len(live) <= 1, f"{id_to_str(input_id)} is in {len(live)} live parcels"
        if row.Status == "Assigned":
            assert live == [bytes(row.LastParcelID)]
        # Successes: the test's own tally, exactly one for a Processed input, none otherwise.
        serial = (row.Descriptor or {}).get("serial")
        tally = model.successes[input_id] + (
            model.child_successes[serial] if serial is not None else 0
        )
        assert tally == (1 if row.Status == "Processed" else 0), (id_to_str(input_id), row.Status)
        if row.Status == "Processed":
            last = parcels[bytes(row.LastParcelID)]
            assert last.Status in ("Done", "PartiallyDone")
            assert bytes(last.ParcelID) in carried_by[input_id]
            if _is_recovery(last):  # only a split child is claimed by one
                assert row.ParentInputID is not None and last.Status == "Done"
    # Parcels with no live state left hold no Assigned input.
    for parcel_id, parcel in parcels.items():
        if parcel.Status not in LIVE_PARCEL_STATES:
            assert not [
                i
                for i, row in inputs.items()
                if row.Status == "Assigned" and bytes(row.LastParcelID) == parcel_id
            ]
    await assert_counters_exact(database)


# -- the test -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("properties") / "dxts.sqlite"
    url = f"sqlite+aiosqlite:///{path}"

    async def create() -> None:
        database = Database(url)
        await database.start()
        async with database.engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
            await ensure_lock_rows(conn)
        await database.dispose()

    asyncio.run(create())
    return url


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=st.lists(steps, min_size=8, max_size=30))
def test_random_programs_keep_every_invariant(sqlite_file: str, program: list[tuple]) -> None:
    async def run() -> None:
        database = Database(sqlite_file)
        await database.start()
        try:
            catalogue = MemoryCatalogue()
            model = Model(await transformation(database, hooks=HOOKS))
            for op in program:
                await step(database, catalogue, model, op)
                await check(database, model)
        finally:
            await database.dispose()

    asyncio.run(run())


def test_the_checks_catch_an_input_processed_behind_their_back(sqlite_file: str) -> None:
    """The invariants are only worth something if they fail: an input moved to Processed
    without any reported success (journal and all, so the counters still agree) is caught."""

    async def run() -> None:
        database = Database(sqlite_file)
        await database.start()
        try:
            model = Model(await transformation(database))
            (input_id,) = await feed(database, model.world, 1)
            await check(database, model)
            async with database.transaction(RC) as conn:
                await conn.execute(
                    sa.update(execution.inputs)
                    .where(execution.inputs.c.InputID == input_id)
                    .values(Status="Processed")
                )
                await journal_inputs(
                    conn, {(model.world.transformation_id, "Unassigned", "Processed"): 1}
                )
            with pytest.raises(AssertionError, match="Processed"):
                await check(database, model)
        finally:
            await database.dispose()

    asyncio.run(run())
