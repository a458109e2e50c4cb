"""Invoking plugins: sync off the loop, async on it, streams bounded, every output checked."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import plugins_support as s
import pytest

from dxts.core.errors import InvalidArgument
from dxts.core.plugins import (
    Accept,
    ActionResult,
    ComputeParcel,
    FileInput,
    Input,
    InputRecord,
    NoMoreInputs,
    Operation,
    PluginFailed,
    PluginRegistryError,
    Providers,
    Registry,
    SetFeederState,
    ToUnassigned,
)
from dxts.core.plugins.invoke import INPUT_CHUNK, STREAM_BUFFER
from dxts.core.states import InputStatus


def make_registry(counter: s.Counter | None = None) -> Registry:
    providers = Providers()
    providers.add(s.Counter, counter or s.Counter())
    return Registry.of(
        {
            "feeder": {
                "Seeds": s.seeds,
                "AsyncSeeds": s.async_seeds,
                "Endless": s.endless,
                "Listed": s.listed,
                "Exhausted": s.exhausted,
                "Nothing": s.nothing,
                "NegativeSize": s.negative_size,
                "Unhashable": s.unhashable_descriptor,
                "Dict": s.yields_a_dict,
                "Late": s.input_after_the_end,
                "Raises": s.raises,
                "Maybe": s.maybe_catalogue,
                "Invalid": s.queries_badly,
            },
            "packer": {
                "Pairs": s.pairs,
                "AsyncPairs": s.async_pairs,
                "Confused": s.packer_yielding_inputs,
            },
            "hook": {
                "Retry": s.retry,
                "Extend": s.extend_feeder,
                "BadFeederArgs": s.bad_feeder_args,
                "Govern": s.govern,
                "Accept": s.accept,
            },
            "action": {"Check": s.check},
        },
        providers=providers,
    )


async def feed(registry: Registry, name: str, args: Any = None, **kw: Any) -> list[Any]:
    context = {"transformation": s.transformation(), "feeder_state": None, **kw}
    phase = context.pop("phase", "active")
    return [item async for item in registry.stream("Feeder", name, args, phase=phase, **context)]


def records(count: int) -> list[InputRecord]:
    return [InputRecord(uuid.uuid4(), None, None, {"n": n}) for n in range(count)]


async def pack(
    registry: Registry, name: str, inputs: Any, *, flush: bool = False, args: Any = None
) -> list[Any]:
    stream = registry.stream(
        "Packer",
        name,
        {"size": 3} if args is None else args,
        phase="active",
        transformation=s.transformation(),
        inputs=inputs,
        flush=flush,
        feeder_active=True,
        input_overview={InputStatus.UNASSIGNED: 10},
    )
    return [item async for item in stream]


async def test_a_sync_feeder_runs_in_one_worker_thread_and_gets_its_context() -> None:
    counter = s.Counter()
    items = await feed(make_registry(counter), "Seeds", {"count": 3}, feeder_state={"next": 10})
    assert [i.descriptor for i in items[:3]] == [{"seed": 10}, {"seed": 11}, {"seed": 12}]
    assert items[3] == SetFeederState({"next": 13})
    assert len(set(counter.threads)) == 1
    assert counter.threads[0] != threading.current_thread().name


async def test_the_feeder_is_told_it_is_scouting_and_args_are_checked_for_the_phase() -> None:
    registry = make_registry()
    items = await feed(registry, "Seeds", {"scouting_count": 2}, phase="scouting")
    assert len(items) == 3  # two seeds from the scouting sample, one bookmark
    with pytest.raises(InvalidArgument) as error:
        await feed(registry, "Seeds", {"count": 2}, phase="scouting")
    assert [v.field for v in error.value.violations] == ["feeder_args.scouting_count"]


async def test_args_are_validated_before_the_plugin_runs() -> None:
    counter = s.Counter()
    with pytest.raises(InvalidArgument) as error:
        await feed(make_registry(counter), "Seeds", {"count": "many"})
    assert [v.field for v in error.value.violations] == ["feeder_args.count"]
    assert counter.threads == []


async def test_an_async_feeder_gets_injected_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DXTS_TEST_KNOBS_DEPTH", "9")
    items = await feed(make_registry(), "AsyncSeeds", {"count": 2})
    assert [i.descriptor for i in items[:2]] == [{"seed": 0, "depth": 9}, {"seed": 1, "depth": 9}]
    assert items[2] == NoMoreInputs()


async def test_plain_functions_may_return_a_list_one_proposal_or_nothing() -> None:
    registry = make_registry()
    assert await feed(registry, "Listed") == [FileInput(lfn="/a", lfn_size=1), NoMoreInputs()]
    assert await feed(registry, "Exhausted") == [NoMoreInputs()]
    assert await feed(registry, "Nothing") == []
    assert await feed(registry, "Maybe") == [Input(descriptor={"had": False})]


async def test_a_sync_generator_is_streamed_and_closed_without_running_away() -> None:
    counter = s.Counter()
    registry = make_registry(counter)
    context = {"transformation": s.transformation(), "feeder_state": {}}
    taken = 0
    async with contextlib.aclosing(
        registry.stream("Feeder", "Endless", None, phase="active", **context)
    ) as stream:
        async for _ in stream:
            taken += 1
            if taken == 3000:
                break
    # Closing stops the generator in its own thread, within a bounded distance of the consumer.
    for _ in range(1000):
        if counter.threads and counter.threads[-1].startswith("closed in"):
            break
        await _yield_to_the_worker()
    closed = counter.threads[-1]
    produced = int(counter.threads[-2])
    assert (
        closed.startswith("closed in") and closed != f"closed in {threading.current_thread().name}"
    )
    assert 3000 <= produced <= 3000 + STREAM_BUFFER + 1


async def _yield_to_the_worker() -> None:
    import asyncio

    await asyncio.sleep(0.001)


@pytest.mark.parametrize(
    ("name", "field", "text"),
    [
        ("NegativeSize", "FileInput.lfn_size", "feeder 'NegativeSize' built an invalid FileInput"),
        ("Unhashable", "Input.descriptor", "not canonicalisable as JSON"),
        ("Dict", "yield[0]", "feeder 'Dict' yielded a dict; a feeder yields Input, SetFeeder"),
        ("Late", "yield[2]", "feeder 'Late' yielded an input after NoMoreInputs"),
    ],
)
async def test_malformed_yields_are_refused_naming_the_plugin_and_field(
    name: str, field: str, text: str
) -> None:
    with pytest.raises(InvalidArgument) as error:
        await feed(make_registry(), name)
    (violation,) = error.value.violations
    assert violation.field == field
    assert text in str(error.value)


async def test_a_plugin_that_raises_is_a_failure_naming_it() -> None:
    received = []
    with pytest.raises(PluginFailed) as error:
        async for item in make_registry().stream(
            "Feeder", "Raises", None, phase="active", transformation=s.transformation(),
            feeder_state={},
        ):  # fmt: skip
            received.append(item)
    assert received == [Input(descriptor={"seed": 0})]
    assert "feeder 'Raises' ((plugins_support:raises)) raised RuntimeError" in str(error.value)
    assert isinstance(error.value.__cause__, RuntimeError)


async def test_the_runner_must_pass_the_points_context() -> None:
    with pytest.raises(TypeError, match="must pass exactly"):
        await feed(make_registry(), "Seeds", scouting=True)
    with pytest.raises(TypeError, match=r"use Registry\.stream"):
        await make_registry().call("Feeder", "Seeds", None, phase="active")


async def test_a_sync_packer_reads_an_async_source_in_order_from_its_thread() -> None:
    counter = s.Counter()
    inputs = records(2 * INPUT_CHUNK + 8)  # spans chunks; 520 = 3 * 173 + 1

    async def claimed() -> AsyncIterator[InputRecord]:
        for record in inputs:
            yield record

    parcels = await pack(make_registry(counter), "Pairs", claimed(), flush=True)
    assert [i for p in parcels for i in p.inputs] == [r.id for r in inputs]
    assert len(parcels[-1].inputs) == len(inputs) % 3  # the remainder, flushed
    assert counter.threads[0] != threading.current_thread().name


async def test_an_async_packer_reads_a_plain_list() -> None:
    inputs = records(7)
    parcels = await pack(make_registry(), "AsyncPairs", inputs)
    assert parcels == [
        ComputeParcel(inputs=[r.id for r in inputs[:3]]),
        ComputeParcel(inputs=[r.id for r in inputs[3:6]]),
    ]


async def test_a_packer_may_not_yield_feeder_proposals() -> None:
    with pytest.raises(InvalidArgument, match="packer 'Confused' yielded a Input"):
        await pack(make_registry(), "Confused", records(1), args={})


async def test_handle_failed_input_runs_off_the_loop_and_must_decide() -> None:
    counter = s.Counter()
    registry = make_registry(counter)
    context = {"transformation": s.transformation(), "parcel": s.failed_parcel()}
    fresh = InputRecord(uuid.uuid4(), "/a", 1, None, InputStatus.FAILED, error_count=1)
    decision = await registry.call("HandleFailedInput", "Retry", {}, phase="active", input=fresh,
                                   **context)  # fmt: skip
    assert decision == ToUnassigned()
    assert counter.threads[0] != threading.current_thread().name
    worn = InputRecord(uuid.uuid4(), "/a", 1, None, InputStatus.FAILED, error_count=3)
    with pytest.raises(InvalidArgument, match="returned str; HandleFailedInput expects ToUnass"):
        await registry.call("HandleFailedInput", "Retry", {}, phase="active", input=worn,
                            **context)  # fmt: skip


async def test_operations_carry_feeder_args_valid_for_the_target() -> None:
    registry = make_registry()
    context = {"transformation": s.transformation("Seeds"), "input_overview": {}}
    operation = await registry.call("TransformationActive", "Extend", {"max_errors": 7},
                                    phase="active", **context)  # fmt: skip
    assert operation == Operation(feeder_args={"count": 7}, flush=True)
    assert await registry.call("TransformationActive", "Extend", {"max_errors": 1},
                               phase="active", **context) is None  # fmt: skip
    with pytest.raises(InvalidArgument) as error:
        await registry.call("TransformationActive", "BadFeederArgs", {}, phase="active", **context)
    assert [v.field for v in error.value.violations] == ["result.feeder_args.count"]
    # Valid outside a scout, contradictory inside one: refused while scouting.
    with pytest.raises(InvalidArgument, match="scouting_count"):
        await registry.call("TransformationActive", "Extend", {"max_errors": 7},
                            phase="scouting", **context)  # fmt: skip
    without_feeder = {"transformation": s.transformation(None), "input_overview": {}}
    with pytest.raises(InvalidArgument, match="which has no feeder"):
        await registry.call("TransformationActive", "Extend", {}, phase="active", **without_feeder)


async def test_workgraph_hooks_act_on_members_only() -> None:
    registry = make_registry()
    members = [s.transformation(), s.transformation()]
    context = {"workgraph": None, "transformations": members, "input_overviews": {}}
    operations = await registry.call("WorkgraphActive", "Govern", {}, phase="active", **context)
    assert operations == {m.id: Operation(feeder_enabled=False) for m in members}
    with pytest.raises(InvalidArgument, match="which is not a member"):
        await registry.call("WorkgraphActive", "Govern", {"mode": "stranger"}, phase="active",
                            **context)  # fmt: skip
    with pytest.raises(InvalidArgument, match="WorkgraphActive expects a dict"):
        await registry.call("WorkgraphActive", "Govern", {"mode": "accept"}, phase="active",
                            **context)  # fmt: skip
    accepted = await registry.call("ScoutingToApproving", "Accept", None, phase="scouting",
                                   **context)  # fmt: skip
    assert accepted == Accept()


async def test_actions_must_return_an_action_result() -> None:
    registry = make_registry()
    off = {"transformation": s.transformation(enabled=False)}
    result = await registry.call("Finalizing", "Check", None, phase="active", input_overview={},
                                 **off)  # fmt: skip
    assert result == ActionResult.passed()
    troubled = {InputStatus.PROBLEMATIC: 2}
    result = await registry.call("Archiving", "Check", None, phase="active",
                                 input_overview=troubled, **off)  # fmt: skip
    assert result == ActionResult.failed("2 problematic")
    with pytest.raises(InvalidArgument, match="Finalizing expects an ActionResult"):
        await registry.call("Finalizing", "Check", None, phase="active", input_overview={},
                            transformation=s.transformation())  # fmt: skip
    with pytest.raises(InvalidArgument, match="cannot be bound as Cleaning"):
        await registry.call("Cleaning", "Check", None, phase="active", input_overview={}, **off)


async def test_a_factory_provider_is_made_once_on_first_use() -> None:
    made = []

    async def make_counter() -> s.Counter:
        made.append(1)
        return s.Counter()

    providers = Providers()
    providers.add_factory(s.Counter, make_counter)
    registry = Registry.of({"feeder": {"Seeds": s.seeds}}, providers=providers)
    registry.check()
    assert made == []
    for _ in range(2):
        await feed(registry, "Seeds", {"count": 1})
    assert made == [1]


async def test_a_missing_provider_is_named_even_when_the_check_was_skipped() -> None:
    registry = Registry.of({"feeder": {"Seeds": s.seeds}})  # no Counter provider, no check()
    with pytest.raises(PluginRegistryError, match="nothing provides parameter 'counter'"):
        await feed(registry, "Seeds")


async def test_a_domain_error_inside_a_plugin_is_its_failure() -> None:
    with pytest.raises(PluginFailed, match="raised InvalidArgument") as error:
        await feed(make_registry(), "Invalid")
    assert isinstance(error.value.__cause__, InvalidArgument)


async def test_cancelling_the_consumer_stops_a_sync_generator() -> None:
    import asyncio

    counter = s.Counter()
    registry = make_registry(counter)
    started = asyncio.Event()

    async def consume() -> None:
        context = {"transformation": s.transformation(), "feeder_state": {}}
        async for _ in registry.stream("Feeder", "Endless", None, phase="active", **context):
            started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(1000):
        if counter.threads[-1].startswith("closed in"):
            break
        await _yield_to_the_worker()
    assert counter.threads[-1].startswith("closed in")
