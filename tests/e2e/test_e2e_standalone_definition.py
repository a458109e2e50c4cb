"""The standalone `dxts-definition` (its own process, its own settings, no registry shared with
execution) runs a Seeds feeder's ReconcileFeederInputs in Finalizing: the feeder is injected its
`counts` (an InputOverviewReader) in the definition process too, and the workgraph completes.
Every component runs from its console script with the tokens of its own kind, as the chart
deploys them."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from e2e_world import bundle, seeds, step, workgraph

from dxts.bench.cluster import Backend, LocalCluster
from dxts.core.grpc import channel
from dxts.v1 import common_pb2, definition_pb2, definition_pb2_grpc

PACE = "0.2"
WAIT_S = 120.0
FAST = {
    "definition": {"DXTS_LIFECYCLE_INTERVAL_S": PACE},
    "execution": {
        "DXTS_EXECUTION_FEED_INTERVAL_S": PACE,
        "DXTS_EXECUTION_PACK_INTERVAL_S": PACE,
        "DXTS_EXECUTION_RECORD_INTERVAL_S": PACE,
        "DXTS_EXECUTION_FAILED_INPUTS_INTERVAL_S": PACE,
    },
    "dispatcher": {
        "DXTS_DISPATCH_IDLE_S": PACE,
        "DXTS_DISPATCH_POLL_INTERVAL_S": PACE,
        "DXTS_DISPATCH_STATUS_INTERVAL_S": "1",
    },
    "backend-null": {"DXTS_NULL_OUTPUTS": '["out"]'},
}


async def test_reconcile_feeder_inputs_of_a_seeds_feeder_runs_in_the_standalone_process(
    db_url: str, tmp_path: Path
) -> None:
    document = workgraph(
        {"seeds": seeds(3, max_in_flight=2)},
        {"Sim": step("seeds", actions={"Finalizing": ["ReconcileFeederInputs"]})},
        {"sims": "Sim/out"},
        hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": 3}}},
    )
    with LocalCluster(tmp_path, db_url=db_url, backends=[Backend("null")], env=FAST) as cluster:
        token = cluster.user_token("lhcb", "olivia", ["operator"])
        async with channel(cluster.addresses["definition"], token=token) as ch:
            stub = definition_pb2_grpc.DefinitionServiceStub(ch)  # type: ignore[no-untyped-call]
            submitted = await stub.SubmitWorkgraph(
                definition_pb2.SubmitWorkgraphRequest(
                    request_id=str(uuid.uuid4()), bundle=bundle(document)
                )
            )
            await stub.StartWorkgraph(
                definition_pb2.StartWorkgraphRequest(
                    request_id=str(uuid.uuid4()), workgraph_id=submitted.workgraph_id
                )
            )
            deadline = time.monotonic() + WAIT_S
            while True:
                got = await stub.GetWorkgraph(
                    definition_pb2.GetWorkgraphRequest(workgraph_id=submitted.workgraph_id)
                )
                if got.workgraph.status == common_pb2.WORKGRAPH_STATUS_COMPLETED:
                    break
                assert time.monotonic() < deadline, (
                    f"the workgraph is {common_pb2.WorkgraphStatus.Name(got.workgraph.status)}; "
                    f"definition's log:\n{cluster.components['definition'].log_path.read_text()}"
                )
                await asyncio.sleep(0.5)
        log = cluster.components["definition"].log_path.read_text()
    assert "nothing provides" not in log
