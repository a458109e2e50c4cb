"""Measured resource usage (Outcome.usage): stored with the outcome and as the parcel's `usage`
annotation, kept through Completing → Done, and read by EstimateResourceUsage through the real
path — recorded outcome, the Completing sweep, ListParcels of a served execution component, the
lifecycle's GrpcExecution view — on SQLite and MariaDB."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import runner_support as s
from recording_world import (
    World,
    definitions,
    feed,
    outcome,
    pack,
    parcel,
    report,
    stored_message,
)

from dxts.core.adaptor.codec import outcome_to_json
from dxts.core.adaptor.mapping import outcome_from_proto
from dxts.core.builtins import actions
from dxts.core.catalogue import FileCatalogue
from dxts.core.db import Database
from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.ids import id_to_str
from dxts.core.plugins import Transformation
from dxts.core.settings import ServerSettings
from dxts.core.states import ActionResult, Kind, TransformationStatus
from dxts.definition.edge.execution_client import GrpcExecution
from dxts.execution.component import build_execution
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.execution.settings import ExecutionSettings
from dxts.v1 import common_pb2

RECORDED = common_pb2.OUTCOME_DISPOSITION_RECORDED
FAILED = common_pb2.OUTCOME_RESULT_FAILED
SERVICE = ("dxts", "dxts-lifecycle", ["service"])
GB = 10**9


def measured(
    parcel_id: bytes, *, cpu_s: float, memory: int, wall_s: float = 60.0, **options: Any
) -> common_pb2.Outcome:
    found = outcome(parcel_id, **options)
    found.usage.cpu_seconds = cpu_s
    found.usage.wall_seconds = wall_s
    found.usage.max_memory_bytes = memory
    return found


async def done_parcels(
    database: Database, world: World, catalogue: FileCatalogue, *usages: tuple[float, int]
) -> list[bytes]:
    """One Done parcel per (cpu seconds, memory bytes), each with one processed input."""
    inputs = await feed(database, world, len(usages))
    parcel_ids = await pack(database, world, [[i] for i in inputs])
    outcomes = [
        measured(p, cpu_s=cpu, memory=memory, report=report(**{id_to_str(i): "SUCCESS"}))
        for p, i, (cpu, memory) in zip(parcel_ids, inputs, usages, strict=True)
    ]
    acks = await record_outcomes(database, outcomes)
    assert {a.disposition for a in acks} == {RECORDED}
    recorder = Recorder(database, catalogue, ActiveSnapshot(definitions(world)))
    assert await recorder.record_completing() == len(usages)
    return parcel_ids


async def test_usage_is_stored_with_the_outcome_and_kept_on_the_done_parcel(
    database: Database, world: World, catalogue: FileCatalogue
) -> None:
    inputs = await feed(database, world, 1)
    (p,) = await pack(database, world, [inputs])
    sent = measured(
        p,
        cpu_s=5400.0,
        wall_s=7200.0,
        memory=3 * GB,
        report=report(**{id_to_str(inputs[0]): "SUCCESS"}),
    )

    await record_outcomes(database, [sent])

    row = await parcel(database, p)
    assert row.Status == "Completing"
    assert row.Annotations["outcome"]["usage"] == {
        "cpu_seconds": 5400.0,
        "wall_seconds": 7200.0,
        "max_memory_bytes": 3 * GB,
    }
    assert row.Annotations["usage"] == {"cpu_hours": 1.5, "wall_hours": 2.0, "memory_gb": 3.0}
    back = stored_message(row.Annotations)
    assert back is not None and back.usage == sent.usage

    assert (
        await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
        == 1
    )
    row = await parcel(database, p)
    assert row.Status == "Done"
    assert row.Annotations["usage"] == {"cpu_hours": 1.5, "wall_hours": 2.0, "memory_gb": 3.0}


async def test_unreported_usage_is_absent_and_a_failed_parcel_keeps_what_was_measured(
    database: Database, world: World
) -> None:
    inputs = await feed(database, world, 2)
    silent, failed = await pack(database, world, [inputs[:1], inputs[1:]])
    partial = outcome(failed, result=FAILED, message="oom")
    partial.usage.max_memory_bytes = 8 * GB  # only memory measured
    bogus = outcome(silent)
    bogus.usage.cpu_seconds = float("nan")  # unmeasurable: dropped, not stored as NaN

    await record_outcomes(database, [bogus, partial])

    row = await parcel(database, silent)
    assert "usage" not in row.Annotations
    assert row.Annotations["outcome"]["usage"] == {}
    # not reported at all
    assert "usage" not in outcome_to_json(outcome_from_proto(outcome(silent)))
    row = await parcel(database, failed)
    assert row.Status == "Failed"
    assert row.Annotations["usage"] == {"memory_gb": 8.0}
    back = stored_message(row.Annotations)
    assert back is not None and back.usage.HasField("max_memory_bytes")
    assert not back.usage.HasField("cpu_seconds")


@pytest.fixture
async def view(
    database: Database,
    world: World,
    catalogue: FileCatalogue,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[GrpcExecution]:
    """The lifecycle's ExecutionView over a served execution component."""
    component = await build_execution(
        database,
        settings=ExecutionSettings(),
        registry=s.registry({}),
        catalogue=catalogue,
        definition_client=definitions(world),
        start_sweeps=False,
    )
    keys = DevKeys.load_or_create(tmp_path_factory.mktemp("keys"))
    server = GrpcServer(
        component.services, settings=ServerSettings(listen="127.0.0.1:0"), verifier=keys.verifier()
    )
    try:
        async with server:
            opened = channel(server.address, token=keys.issue(*SERVICE))
            try:
                yield GrpcExecution(opened, database)
            finally:
                await opened.close()
    finally:
        await component.stop()


def member(world: World) -> Transformation:
    return Transformation(
        id=uuid.UUID(bytes=world.transformation_id),
        type="Test",
        kind=Kind.COMPUTE,
        status=TransformationStatus.ACTIVE,
        feeder="List",
        feeder_args={},
        feeder_enabled=False,
        packer="PerInput",
        packer_args={},
        annotations={"id": "Sim"},
    )


async def test_estimate_resource_usage_reads_recorded_usage_and_passes_under_the_limits(
    database: Database, world: World, catalogue: FileCatalogue, view: GrpcExecution
) -> None:
    # Peaks: 1.5 CPU hours (the first), 2 GB (the second).
    await done_parcels(database, world, catalogue, (5400.0, 1 * GB), (1800.0, 2 * GB))

    result = await actions.estimate_resource_usage(
        transformations=[member(world)],
        args=actions.EstimateArgs(max_cpu_hours=2, max_memory_gb=4),
        settings=actions.EstimateSettings(),
        execution=view,
    )

    assert result.result is ActionResult.PASSED, result.message
    # The margin (1.2), rounded up to a tenth (a minute of wall time each: 0.02 → 0.1).
    assert result.updated_requirements == {
        uuid.UUID(bytes=world.transformation_id): {
            "cpu_hours": 1.8,
            "memory_gb": 2.4,
            "wall_hours": 0.1,
        }
    }


async def test_estimate_resource_usage_fails_naming_the_member_over_the_limit(
    database: Database, world: World, catalogue: FileCatalogue, view: GrpcExecution
) -> None:
    await done_parcels(database, world, catalogue, (3 * 3600.0, 1 * GB))

    result = await actions.estimate_resource_usage(
        transformations=[member(world)],
        args=actions.EstimateArgs(max_cpu_hours=2, max_memory_gb=4),
        settings=actions.EstimateSettings(),
        execution=view,
    )

    assert result.result is ActionResult.FAILED
    assert result.message == "Sim used 3 cpu_hours per parcel (at most 2)"
