"""Scenario 11 (MariaDB): a user job submitted through the definition service runs to Done on
the same backend while a workgraph runs there to Completed; the user parcel is no
transformation's (not counted, no inputs), its outcome and outputs readable by its owner. A
user job whose parcel fails is simply terminal: resubmitting it is a new parcel."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml
from e2e_world import Launch, W, World, check_invariants, seeds, step, workgraph

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.states import ParcelStatus
from dxts.v1 import common_pb2, definition_pb2, execution_pb2

pytestmark = pytest.mark.mariadb_only

JOB = {
    "cwlVersion": "v1.2",
    "class": "CommandLineTool",
    "$namespaces": {"dirac": "https://diracgrid.org/cwl#"},
    "hints": {"dirac:Job": {}},
    "baseCommand": ["true"],
    "inputs": {"seeds": {"type": "string[]"}},
    "outputs": {"out": {"type": "File", "outputBinding": {"glob": "out.txt"}}},
}


async def test_a_user_job_runs_beside_a_workgraph(launch_mariadb: Launch) -> None:
    document = workgraph(
        {"seeds": seeds(6)},
        {"Sim": step("seeds")},
        {"sims": "Sim/out"},
        hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": 6}}},
    )
    # The first user parcel fails (the workgraph's parcels are under their transformation's
    # prefix, never /user/).
    null = NullSettings(
        name="null",
        outputs=["out"],
        rules=[NullRule(fate="failure", output_prefix="/user/", times=1)],
    )
    async with launch_mariadb(null=null) as world:
        wg = await world.submit(document)
        await world.start(wg)
        failed_id = await _submit(world)
        failed = await world.until("the first user parcel Failed", _ended(world, failed_id), wg)
        assert failed.parcel.status == enum_to_proto(ParcelStatus.FAILED)  # type: ignore[misc]
        submitted_id = await _submit(world)
        job = await world.until("the resubmitted user parcel Done", _ended(world, submitted_id), wg)
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        assert job.parcel.status == enum_to_proto(ParcelStatus.DONE)  # type: ignore[misc]
        assert job.parcel.transformation_id == ""
        assert job.parcel.backend == "null"
        assert (job.vo, job.owner_sub) == ("lhcb", "olivia")
        assert json.loads(job.compute.parameters_json) == {"seeds": ["1", "2"]}
        assert [o.output_name for o in job.outputs] == ["out"]
        assert job.outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED
        # Each parcel started once at the backend: the two user parcels and the workgraph's.
        workgraph_parcels = len(await world.parcels(wg, "Sim"))
        counters = await world.backend_counters()
        assert counters["started"] == counters["accepted"] == workgraph_parcels + 2
        assert failed.outcome.result == common_pb2.OUTCOME_RESULT_FAILED
        assert (await world.census(wg))["Sim"]["inputs"] == {"Processed": 6}


async def _submit(world: World) -> str:
    submitted = await world.definition.SubmitJob(
        definition_pb2.SubmitJobRequest(
            request_id=str(uuid.uuid4()),
            bundle=common_pb2.DocumentBundle(
                main_path="job.cwl", files={"job.cwl": yaml.safe_dump(JOB).encode()}
            ),
            inputs_json=json.dumps({"seeds": ["1", "2"]}),
        )
    )
    return str(submitted.parcel_id)


def _ended(world: World, parcel_id: str) -> Any:
    terminal = {enum_to_proto(s) for s in (ParcelStatus.DONE, ParcelStatus.FAILED)}

    async def check() -> execution_pb2.GetUserParcelResponse | None:
        found = await world.execution.GetUserParcel(
            execution_pb2.GetUserParcelRequest(parcel_id=parcel_id)
        )
        return found if found.parcel.status in terminal else None

    return check
