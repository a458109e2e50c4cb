"""The feeder runner on SQLite and MariaDB: batches, duplicates, bookmarks, exhaustion, failures."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import runner_support as s
from prometheus_client import REGISTRY

from dxts.core.db import Database
from dxts.core.locks import Lock, LockKind, LockManager
from dxts.core.plugins import (
    FileInput,
    Input,
    NoMoreInputs,
    PluginArgs,
    SetFeederState,
)
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.sweeps import keyed


def failures(feeder: str) -> float:
    value = REGISTRY.get_sample_value(
        "dxts_execution_plugin_failures_total", {"point": "Feeder", "plugin": feeder}
    )
    return value or 0.0


def listed(n: int, prefix: str = "/lhcb/f") -> dict[str, Any]:
    return {"inputs": [{"lfn": f"{prefix}{i}", "lfn_size": 10 + i} for i in range(n)]}


class NArgs(PluginArgs):
    n: int = 3


def repeats(*, feeder_args: NArgs) -> Iterator[Any]:
    """The same three seeds every time, with one repeat inside the pass."""
    for seed in [0, 1, 1, 2][: feeder_args.n + 1]:
        yield Input(descriptor={"seed": seed})


def bookmark_then_raise(*, feeder_state: dict[str, Any]) -> Iterator[Any]:
    for i in range(3):
        yield FileInput(lfn=f"/lhcb/b/{i}", lfn_size=1)
    yield SetFeederState({"after": 3})
    yield FileInput(lfn="/lhcb/b/3", lfn_size=1)
    raise RuntimeError("catalogue went away")


def scouted(*, scouting: bool) -> Iterator[Any]:
    yield Input(descriptor={"scouting": scouting})


def bad_lfn() -> Iterator[Any]:
    yield FileInput(lfn="/lhcb/ok", lfn_size=1)
    yield FileInput(lfn="/lhcb/x" * 300, lfn_size=1)


def bad_size() -> Iterator[Any]:
    yield FileInput(lfn="/lhcb/ok", lfn_size=1)
    yield FileInput(lfn="/lhcb/neg", lfn_size=-5)


def bad_descriptor() -> Iterator[Any]:
    yield Input(descriptor={"ok": 1})
    yield Input(descriptor={"x": math.nan})


def not_a_proposal() -> Iterator[Any]:
    yield Input(descriptor={"ok": 1})
    yield {"lfn": "/lhcb/dict"}


def twice_exhausted() -> Iterator[Any]:
    yield Input(descriptor={"a": 1})
    yield NoMoreInputs()
    yield Input(descriptor={"b": 1})


REGISTRY_PLUGINS = {
    "feeder": {
        "Repeats": repeats,
        "BookmarkThenRaise": bookmark_then_raise,
        "Scouted": scouted,
        "BadLfn": bad_lfn,
        "BadSize": bad_size,
        "BadDescriptor": bad_descriptor,
        "NotAProposal": not_a_proposal,
        "TwiceExhausted": twice_exhausted,
    }
}


@pytest.fixture(scope="module")
def plugins() -> Any:
    return s.registry(REGISTRY_PLUGINS)


async def test_inputs_are_inserted_in_batches_with_the_bookmark_and_exhaustion(
    database: Database, plugins: Any
) -> None:
    t = await s.transformation(database, feeder="List", feeder_args=listed(7))
    result = await run_feeder(database, plugins, t, batch=3)
    assert (result.yielded, result.inserted, result.batches) == (7, 7, 3)
    assert result.exhausted and result.bookmark == {"next": 7}
    assert await s.feeder_row(database, t.id) == ({"next": 7}, True)
    assert (await s.transformation_row(database, t.id)).FeederEnabled is True  # the switch
    rows = await s.input_rows(database, t.id)
    assert sorted(r.LFN for r in rows) == sorted(f"/lhcb/f{i}" for i in range(7))
    assert {r.LFNSize for r in rows} == set(range(10, 17)) and s.by_status(rows) == {
        "Unassigned": 7
    }
    assert await s.counted(database, t.id) == {("Input", "Unassigned"): 7}
    await s.assert_counters_exact(database, t.id)
    events = [(r.EventType, r.Author) for r in await s.log_rows(database, t.id)]
    assert events == [("FeederExhausted", "execution")]


async def test_duplicates_are_dropped_and_only_inserted_rows_are_journalled(
    database: Database, plugins: Any
) -> None:
    t = await s.transformation(database, feeder="Repeats")
    first = await run_feeder(database, plugins, t)
    assert (first.yielded, first.inserted) == (4, 3)
    again = await run_feeder(database, plugins, t)  # no bookmark: everything again
    assert (again.yielded, again.inserted) == (4, 0)
    assert await s.counted(database, t.id) == {("Input", "Unassigned"): 3}
    await s.assert_counters_exact(database, t.id)


async def test_a_bookmark_commits_only_with_the_inputs_before_it(
    database: Database, plugins: Any
) -> None:
    t = await s.transformation(database, feeder="BookmarkThenRaise")
    before = failures("BookmarkThenRaise")
    # Batches of 3: the first three inputs commit on their own; the bookmark and the input
    # after it are pending when the feeder raises, and are dropped with it.
    result = await run_feeder(database, plugins, t, batch=3)
    assert result.error is not None and "catalogue went away" in result.error
    assert (result.inserted, result.bookmark) == (3, None)
    assert (await s.feeder_row(database, t.id)).bookmark is None
    assert sorted(r.LFN for r in await s.input_rows(database, t.id)) == [
        "/lhcb/b/0",
        "/lhcb/b/1",
        "/lhcb/b/2",
    ]
    assert failures("BookmarkThenRaise") == before + 1
    logged = await s.log_rows(database, t.id)
    assert [r.EventType for r in logged] == ["FeederFailed"]
    assert "catalogue went away" in logged[0].Message
    await s.assert_counters_exact(database, t.id)

    # One batch for everything: nothing at all is written.
    t2 = await s.transformation(database, feeder="BookmarkThenRaise")
    result = await run_feeder(database, plugins, t2, batch=100)
    assert (result.inserted, result.batches) == (0, 0)
    assert await s.input_rows(database, t2.id) == []
    assert await s.counted(database, t2.id) == {}


@pytest.mark.parametrize(
    ("feeder", "fragment"),
    [
        ("BadLfn", "at most 512"),
        ("BadSize", "greater than or equal to 0"),
        ("BadDescriptor", "not canonicalisable"),
        ("NotAProposal", "yielded a dict"),
        ("TwiceExhausted", None),
    ],
)
async def test_malformed_yields_are_refused_and_nothing_is_written(
    database: Database, plugins: Any, feeder: str, fragment: str | None
) -> None:
    t = await s.transformation(database, feeder=feeder)
    before = failures(feeder)
    result = await run_feeder(database, plugins, t)
    if fragment is None:  # NoMoreInputs ends the run: what follows it is never read
        assert result.exhausted and result.inserted == 1
        return
    assert result.error is not None and fragment in result.error, result.error
    assert result.inserted == 0 and await s.input_rows(database, t.id) == []
    assert await s.counted(database, t.id) == {}
    assert failures(feeder) == before + 1
    assert [r.EventType for r in await s.log_rows(database, t.id)] == ["FeederFailed"]


async def test_arguments_failing_their_model_are_refused_and_logged(
    database: Database, plugins: Any
) -> None:
    t = await s.transformation(database, feeder="List", feeder_args={"inputs": [], "x": 1})
    result = await run_feeder(database, plugins, t)
    assert result.error is not None
    assert "feeder_args.inputs" in result.error and "feeder_args.x" in result.error
    assert await s.input_rows(database, t.id) == []
    logged = await s.log_rows(database, t.id)
    assert [r.EventType for r in logged] == ["FeederFailed"]
    assert logged[0].Data["feeder"] == "List"


async def test_the_scouting_flag_reaches_the_feeder(database: Database, plugins: Any) -> None:
    t = await s.transformation(database, feeder="Scouted", scouting=True)
    await run_feeder(database, plugins, t)
    assert [r.Descriptor for r in await s.input_rows(database, t.id)] == [{"scouting": True}]


async def test_a_disabled_feeder_writes_nothing(database: Database, plugins: Any) -> None:
    t = await s.transformation(database, feeder="List", feeder_args=listed(3))
    await s.disable_feeder(database, t.id)  # the operator got there first
    result = await run_feeder(database, plugins, t)
    assert result.stopped and result.inserted == 0
    assert await s.input_rows(database, t.id) == []
    assert (await s.feeder_row(database, t.id)).bookmark is None


async def test_the_feeder_round_skips_what_should_not_run_and_what_another_holder_runs(
    database: Database, plugins: Any
) -> None:
    locks = LockManager(database)
    feeders = keyed(LockKind.FEEDER, locks, 1)

    def work(transformation: Any) -> Any:
        return run_feeder(database, plugins, transformation)

    try:
        t = await s.transformation(database, feeder="List", feeder_args=listed(2))
        assert not replace(t, halted=True).feeds  # the round lists only those that feed
        async with locks.try_hold(Lock(LockKind.FEEDER, t.id)) as held:
            assert held
            assert await feeders.run([t], work) == []
        assert [result.inserted for result in await feeders.run([t], work)] == [2]
    finally:
        await locks.dispose()
