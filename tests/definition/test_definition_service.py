"""DefinitionService over gRPC: submission, reads, labels, the process store and user jobs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jwt
import pytest
import sqlalchemy as sa
from cwl_support import EXAMPLES, FIXTURES
from definition_world import (
    HELD,
    RC,
    REQUIREMENTS,
    ExecutionDouble,
    Stub,
    build_workgraph,
)

from dxts.core.db import Database
from dxts.core.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from dxts.core.ids import content_hash, id_from_str, id_to_str
from dxts.core.schema import accounting, definition
from dxts.v1 import common_pb2, definition_pb2

pb = definition_pb2


def bundle(main: str, files: dict[str, str]) -> common_pb2.DocumentBundle:
    return common_pb2.DocumentBundle(
        main_path=main, files={path: text.encode() for path, text in files.items()}
    )


def example_bundle(name: str) -> common_pb2.DocumentBundle:
    files = {f"{name}.cwl": (EXAMPLES / f"{name}.cwl").read_text()}
    for tool in (EXAMPLES / "transformations").iterdir():
        files[f"transformations/{tool.name}"] = tool.read_text()
    return bundle(f"{name}.cwl", files)


async def count_workgraphs(database: Database) -> int:
    async with database.transaction(RC) as conn:
        return int(
            await conn.scalar(sa.select(sa.func.count()).select_from(definition.workgraphs)) or 0
        )


@pytest.fixture(scope="module")
async def submitted(stubs: dict[str, Stub]) -> pb.SubmitWorkgraphResponse:
    return await stubs["owner"].SubmitWorkgraph(
        pb.SubmitWorkgraphRequest(
            bundle=example_bundle("simulation"), labels={"campaign": "2026"}, request_id="s1"
        )
    )


# -- submission ------------------------------------------------------------------------------------


async def test_an_example_is_submitted_and_read_back(
    stubs: dict[str, Stub], submitted: pb.SubmitWorkgraphResponse
) -> None:
    steps = ["MCSimulation", "MCReconstruction", "MCMerge"]
    assert [p.step for p in submitted.plan] == steps
    assert {p.initial_status for p in submitted.plan} == {common_pb2.TRANSFORMATION_STATUS_ACTIVE}
    assert [list(p.upstream_steps) for p in submitted.plan] == [
        [],
        ["MCSimulation"],
        ["MCReconstruction"],
    ]
    assert list(submitted.warnings) == [] and not submitted.scouts

    got = await stubs["colleague"].GetWorkgraph(
        pb.GetWorkgraphRequest(workgraph_id=submitted.workgraph_id)
    )
    assert got.workgraph.status == common_pb2.WORKGRAPH_STATUS_NEW
    assert (got.workgraph.vo, got.workgraph.owner_sub) == ("lhcb", "ursula")
    assert json.loads(got.workgraph.annotations_json)["labels"] == {"campaign": "2026"}
    members = {m.step: m for m in got.members}
    assert set(members) == set(steps)
    assert [t for t in got.workgraph.transformation_ids] == [
        m.transformation_id for m in got.members
    ]
    assert list(members["MCReconstruction"].upstream_transformation_ids) == [
        members["MCSimulation"].transformation_id
    ]
    assert members["MCSimulation"].feeder == "Seeds"
    assert members["MCReconstruction"].feeder == "Edge"
    planned = {p.step: p for p in submitted.plan}
    assert all(members[s].process_id == planned[s].process_id != "" for s in steps)
    assert json.loads(got.stripped_spec_json)["steps"]["MCMerge"]["run"].startswith("proc:")


async def test_a_dry_run_plans_and_stores_nothing(
    database: Database, stubs: dict[str, Stub]
) -> None:
    before = await count_workgraphs(database)
    reply = await stubs["owner"].SubmitWorkgraph(
        pb.SubmitWorkgraphRequest(bundle=example_bundle("simulation"), dry_run=True)
    )
    assert reply.workgraph_id == ""
    assert [p.transformation_id for p in reply.plan] == ["", "", ""]
    assert [p.step for p in reply.plan] == ["MCSimulation", "MCReconstruction", "MCMerge"]
    assert await count_workgraphs(database) == before


async def test_a_bad_document_is_refused_with_every_problem(
    database: Database, stubs: dict[str, Stub]
) -> None:
    files = {
        "invalid/several.cwl": (FIXTURES / "invalid" / "several.cwl").read_text(),
        "examples/transformations/gauss.cwl": (
            EXAMPLES / "transformations" / "gauss.cwl"
        ).read_text(),
        "examples/transformations/merge.cwl": (
            EXAMPLES / "transformations" / "merge.cwl"
        ).read_text(),
    }
    before = await count_workgraphs(database)
    with pytest.raises(InvalidArgument) as refused:
        await stubs["owner"].SubmitWorkgraph(
            pb.SubmitWorkgraphRequest(bundle=bundle("invalid/several.cwl", files))
        )
    found = {(v.field, v.description.split(":", 1)[0]) for v in refused.value.violations}
    assert found == {
        ("steps.sim.hints", "bare-step"),
        ("steps.merge.in.input-data", "unknown-source"),
        ("steps.sim.out.sim-files", "orphan-output"),
        ("steps.merge.in", "no-driving-input"),
        ("steps.merge.hints.dirac:Transformation.packer.name", "unknown-plugin"),
    }
    assert len(refused.value.violations) == 5
    # Each says where its path is written, as `dxts validate` does: line and column.
    lines = files["invalid/several.cwl"].splitlines()
    said = {v.field: v.description for v in refused.value.violations}
    for field, row, written in (
        ("steps.merge.hints.dirac:Transformation.packer.name", 16, "name: NoSuchPacker"),
        ("steps.merge.in.input-data", 18, "input-data"),
    ):
        column = lines[row - 1].index(written) + 1
        assert said[field].endswith(f"  (line {row}, column {column})"), said[field]
    assert all("  (line " in description for description in said.values())
    assert await count_workgraphs(database) == before


async def test_a_retried_submission_answers_the_original(
    database: Database, stubs: dict[str, Stub], submitted: pb.SubmitWorkgraphResponse
) -> None:
    """The module's submission (request id "s1") sent again, as a client that timed out would."""
    before = await count_workgraphs(database)
    again = await stubs["owner"].SubmitWorkgraph(
        pb.SubmitWorkgraphRequest(
            bundle=example_bundle("simulation"), labels={"campaign": "2026"}, request_id="s1"
        )
    )
    assert again == submitted
    assert again.workgraph_id and all(p.transformation_id for p in again.plan)
    # Another caller's "s1" is another request.
    theirs = await stubs["colleague"].SubmitWorkgraph(
        pb.SubmitWorkgraphRequest(
            bundle=example_bundle("simulation"), labels={"campaign": "2026"}, request_id="s1"
        )
    )
    assert theirs.workgraph_id != submitted.workgraph_id
    assert await count_workgraphs(database) == before + 1


def auto_start_bundle() -> common_pb2.DocumentBundle:
    """The simulation example asking `start: auto` (it does not scout: Active at once)."""
    files = dict(example_bundle("simulation").files)
    text = files["simulation.cwl"].decode()
    assert text.count("    type: MCSimulation\n") == 1
    files["simulation.cwl"] = text.replace(
        "    type: MCSimulation\n", "    type: MCSimulation\n    start: auto\n"
    ).encode()
    return common_pb2.DocumentBundle(main_path="simulation.cwl", files=files)


async def start_rows(database: Database, workgraph_id: str) -> list[tuple[str, str]]:
    """The workgraph's state changes after its creation: (new status, message)."""
    log = accounting.workgraph_log
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(log.c.NewStatus, log.c.Message)
            .where(log.c.WorkgraphID == id_from_str(workgraph_id), log.c.OldStatus.is_not(None))
            .order_by(log.c.LogID)
        )
        return [(str(status), str(message)) for status, message in rows]


async def test_start_auto_submits_and_starts_in_one_request(
    database: Database, stubs: dict[str, Stub]
) -> None:
    reply = await stubs["owner"].SubmitWorkgraph(
        pb.SubmitWorkgraphRequest(bundle=auto_start_bundle(), request_id="auto-1")
    )
    got = await stubs["owner"].GetWorkgraph(pb.GetWorkgraphRequest(workgraph_id=reply.workgraph_id))
    assert got.workgraph.status == common_pb2.WORKGRAPH_STATUS_ACTIVE
    assert {m.status for m in got.members} == {common_pb2.TRANSFORMATION_STATUS_ACTIVE}
    assert await start_rows(database, reply.workgraph_id) == [("Active", "start: auto")]

    # A dry run starts nothing: it creates nothing.
    dry = await stubs["owner"].SubmitWorkgraph(
        pb.SubmitWorkgraphRequest(bundle=auto_start_bundle(), dry_run=True)
    )
    assert dry.workgraph_id == ""


async def test_start_auto_retried_concurrently_creates_and_starts_once(
    database: Database, stubs: dict[str, Stub]
) -> None:
    before = await count_workgraphs(database)
    request = pb.SubmitWorkgraphRequest(bundle=auto_start_bundle(), request_id="auto-2")
    first, second = await asyncio.gather(
        stubs["owner"].SubmitWorkgraph(request), stubs["owner"].SubmitWorkgraph(request)
    )
    assert first.workgraph_id == second.workgraph_id
    assert await count_workgraphs(database) == before + 1
    assert await start_rows(database, first.workgraph_id) == [("Active", "start: auto")]
    # A later retry (a client that timed out) changes nothing either.
    await stubs["owner"].SubmitWorkgraph(request)
    assert await start_rows(database, first.workgraph_id) == [("Active", "start: auto")]


async def test_a_request_id_reused_for_other_labels_is_refused(
    database: Database, stubs: dict[str, Stub], submitted: pb.SubmitWorkgraphResponse
) -> None:
    before = await count_workgraphs(database)
    with pytest.raises(FailedPrecondition, match="request_id 's1'"):
        await stubs["owner"].SubmitWorkgraph(
            pb.SubmitWorkgraphRequest(
                bundle=example_bundle("simulation"), labels={"campaign": "2027"}, request_id="s1"
            )
        )
    assert await count_workgraphs(database) == before


async def test_a_step_name_with_a_slash_is_a_validation_problem(stubs: dict[str, Stub]) -> None:
    files = {"wg.cwl": seeds_workgraph("gauss.cwl").replace("  sim:", '  "s/im":')}
    files["gauss.cwl"] = (FIXTURES / "examples" / "transformations" / "gauss.cwl").read_text()
    files["wg.cwl"] = files["wg.cwl"].replace("sim/sim-files", "s/im/sim-files")
    with pytest.raises(InvalidArgument) as refused:
        await stubs["owner"].SubmitWorkgraph(
            pb.SubmitWorkgraphRequest(bundle=bundle("wg.cwl", files))
        )
    assert "steps.s/im" in {v.field for v in refused.value.violations}


async def test_a_bundle_without_its_main_document_is_refused(stubs: dict[str, Stub]) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await stubs["owner"].SubmitWorkgraph(
            pb.SubmitWorkgraphRequest(bundle=bundle("missing.cwl", {"other.cwl": "{}"}))
        )
    assert [v.field for v in refused.value.violations] == ["bundle.main_path"]


# -- reads ---------------------------------------------------------------------------------------


async def test_list_workgraphs_filters_and_pages(
    database: Database, stubs: dict[str, Stub]
) -> None:
    batch = {"batch": "listing"}
    made = [
        await build_workgraph(database, labels=batch),
        await build_workgraph(database, status="Active", members="Active", labels=batch),
        await build_workgraph(
            database, status="Active", members="Active", labels=batch, owner=("lhcb", "carl")
        ),
    ]
    ids = [f.wid for f in made]

    async def listed(stub: Stub, **filters: Any) -> list[str]:
        found, token = [], ""
        while True:
            reply = await stub.ListWorkgraphs(
                pb.ListWorkgraphsRequest(
                    labels=batch,
                    paging=common_pb2.Paging(page_size=1, page_token=token),
                    **filters,
                )
            )
            found += [w.workgraph_id for w in reply.workgraphs]
            token = reply.next_page_token
            if not token:
                return found

    assert await listed(stubs["colleague"]) == ids
    assert (
        await listed(stubs["colleague"], statuses=[common_pb2.WORKGRAPH_STATUS_ACTIVE]) == ids[1:]
    )
    assert await listed(stubs["colleague"], owner_sub="carl") == ids[2:]
    assert await listed(stubs["colleague"], vo="atlas") == []
    assert await listed(stubs["outsider"]) == []
    assert await listed(stubs["service"]) == ids  # dxts's own components see every VO
    first = await stubs["owner"].ListWorkgraphs(
        pb.ListWorkgraphsRequest(labels=batch, paging=common_pb2.Paging(page_size=1))
    )
    with pytest.raises(InvalidArgument):  # a token is valid only for its filters
        await stubs["owner"].ListWorkgraphs(
            pb.ListWorkgraphsRequest(paging=common_pb2.Paging(page_token=first.next_page_token))
        )


async def test_list_active_transformations_carries_what_the_sweeps_need(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Scouting", members=HELD)
    mine = set(fixture.ids.values())
    found: list[Any] = []
    token = ""
    while True:
        reply = await stubs["service"].ListActiveTransformations(
            pb.ListActiveTransformationsRequest(paging=common_pb2.Paging(page_token=token))
        )
        found += [
            t for t in reply.transformations if t.transformation_id in {id_to_str(i) for i in mine}
        ]
        token = reply.next_page_token
        if not token:
            break
    (simulate,) = found  # reconstruct is Paused, replicate held (New)
    assert simulate.step == "simulate"
    assert simulate.status == common_pb2.TRANSFORMATION_STATUS_ACTIVE
    assert simulate.scouting and not simulate.halted and simulate.feeder_enabled
    assert (simulate.feeder, json.loads(simulate.feeder_state_json)) == ("Seeds", {"bookmark": 7})
    assert json.loads(simulate.requirements_template_json) == REQUIREMENTS
    assert simulate.requirements_template_id == content_hash(REQUIREMENTS).hex()
    assert [o.name for o in simulate.outputs] == ["simulate-files"]
    assert simulate.process_id
    data_only = await stubs["service"].ListActiveTransformations(
        pb.ListActiveTransformationsRequest(kinds=[common_pb2.KIND_DATA])
    )
    assert all(t.kind == common_pb2.KIND_DATA for t in data_only.transformations)
    # A plain GetTransformation does not carry the bookmark.
    plain = await stubs["owner"].GetTransformation(
        pb.GetTransformationRequest(transformation_id=fixture.tid("simulate"))
    )
    assert plain.transformation.feeder_state_json == ""
    assert {a.state for a in plain.actions} == {"Finalizing", "Archiving", "Cancelling"}


async def test_list_active_transformations_by_id_whatever_their_status(
    database: Database, stubs: dict[str, Stub]
) -> None:
    """Asked by id, the listing answers transformations that have left Active too: recording
    takes the declared outputs of a Paused transformation's parcels from it."""
    fixture = await build_workgraph(database, status="Scouting", members=HELD)
    reply = await stubs["service"].ListActiveTransformations(
        pb.ListActiveTransformationsRequest(
            transformation_ids=[fixture.tid("reconstruct"), fixture.tid("simulate")]
        )
    )
    found = {t.step: t for t in reply.transformations}
    assert set(found) == {"reconstruct", "simulate"}
    assert found["reconstruct"].status == common_pb2.TRANSFORMATION_STATUS_PAUSED
    assert [o.name for o in found["simulate"].outputs] == ["simulate-files"]
    with pytest.raises(InvalidArgument):
        await stubs["service"].ListActiveTransformations(
            pb.ListActiveTransformationsRequest(transformation_ids=["not-an-id"])
        )


async def test_list_transformations_of_a_workgraph_by_status(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Scouting", members=HELD)
    reply = await stubs["colleague"].ListTransformations(
        pb.ListTransformationsRequest(
            workgraph_id=fixture.wid,
            statuses=[
                common_pb2.TRANSFORMATION_STATUS_PAUSED,
                common_pb2.TRANSFORMATION_STATUS_NEW,
            ],
        )
    )
    assert [t.step for t in reply.transformations] == ["reconstruct", "replicate"]
    assert list(reply.transformations[1].upstream_transformation_ids) == [
        fixture.tid("reconstruct")
    ]


async def test_labels_are_the_only_annotations_users_change(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, labels={"campaign": "2026", "old": "x"})
    patch = json.dumps({"campaign": "2027", "old": None, "site": "CERN"})
    reply = await stubs["owner"].UpdateAnnotations(
        pb.UpdateAnnotationsRequest(workgraph_id=fixture.wid, merge_patch_json=patch)
    )
    assert json.loads(reply.annotations_json) == {
        "id": "fixture",
        "labels": {"campaign": "2027", "site": "CERN"},
    }
    listed = await stubs["owner"].ListWorkgraphs(pb.ListWorkgraphsRequest(labels={"site": "CERN"}))
    assert fixture.wid in [w.workgraph_id for w in listed.workgraphs]
    with pytest.raises(InvalidArgument):
        await stubs["owner"].UpdateAnnotations(
            pb.UpdateAnnotationsRequest(workgraph_id=fixture.wid, merge_patch_json='{"n": 1}')
        )
    with pytest.raises(PermissionDenied):
        await stubs["colleague"].UpdateAnnotations(
            pb.UpdateAnnotationsRequest(workgraph_id=fixture.wid, merge_patch_json=patch)
        )
    member = await stubs["owner"].UpdateAnnotations(
        pb.UpdateAnnotationsRequest(
            transformation_id=fixture.tid("simulate"), merge_patch_json='{"note": "slow site"}'
        )
    )
    assert json.loads(member.annotations_json)["labels"] == {"note": "slow site"}
    assert json.loads(member.annotations_json)["initial_state"] == "Active"


# -- processes -----------------------------------------------------------------------------------


async def test_the_process_store_registry_and_lineage(
    stubs: dict[str, Stub], submitted: pb.SubmitWorkgraphResponse
) -> None:
    planned = {p.step: p for p in submitted.plan}
    process_id = planned["MCSimulation"].process_id
    got = await stubs["service"].GetProcess(pb.GetProcessRequest(process_id=process_id))
    assert json.loads(got.process.document_json)["class"] == "CommandLineTool"
    assert content_hash(json.loads(got.process.document_json)).hex() == process_id
    tree = await stubs["service"].GetProcessTree(pb.GetProcessTreeRequest(process_id=process_id))
    assert [p.process_id for p in tree.processes] == [process_id]

    published = await stubs["owner"].PublishProcess(
        pb.PublishProcessRequest(name="gauss", version="1.0", process_id=process_id)
    )
    assert (published.version.vo, published.version.author) == ("lhcb", "ursula")
    resolved = await stubs["colleague"].ResolveProcess(
        pb.ResolveProcessRequest(name="gauss", version="1.0")
    )
    assert resolved.version.process_id == process_id
    versions = await stubs["colleague"].ListVersions(pb.ListVersionsRequest(name="gauss"))
    assert [v.version for v in versions.versions] == ["1.0"]
    with pytest.raises(NotFound):
        await stubs["outsider"].ResolveProcess(
            pb.ResolveProcessRequest(vo="lhcb", name="gauss", version="1.0")
        )
    with pytest.raises(PermissionDenied):
        await stubs["outsider"].PublishProcess(
            pb.PublishProcessRequest(vo="lhcb", name="x", version="1", process_id=process_id)
        )

    lineage = await stubs["owner"].ProcessLineage(pb.ProcessLineageRequest(process_id=process_id))
    assert planned["MCSimulation"].transformation_id in lineage.transformation_ids
    assert [(v.name, v.version) for v in lineage.versions] == [("gauss", "1.0")]
    with pytest.raises(NotFound):
        await stubs["outsider"].ProcessLineage(pb.ProcessLineageRequest(process_id=process_id))


PRIVATE_WORKFLOW = """
cwlVersion: v1.2
class: Workflow
doc: lhcb's private recipe around the shared tool
inputs:
  seed: {type: {type: array, items: [File, string]}}
outputs:
  sim-files: {type: "File[]", outputSource: run/sim-files}
steps:
  run:
    run: gauss.cwl
    in: {seed: seed}
    out: [sim-files]
"""


def seeds_workgraph(run: str) -> str:
    return f"""
cwlVersion: v1.2
class: Workflow
$namespaces: {{dirac: https://diracgrid.org/cwl#}}
hints:
  dirac:Workgraph: {{schema_version: "1.0", type: Test}}
inputs:
  events:
    type: {{type: array, items: [File, string]}}
    dirac:Feeder: {{name: Seeds, args: {{target_events: 10, events_per_seed: 10}}}}
steps:
  sim:
    hints: {{dirac:Transformation: {{}}}}
    run: {run}
    in: {{seed: events}}
    out: [sim-files]
outputs:
  sims: {{type: "File[]", outputSource: sim/sim-files}}
"""


async def test_another_vos_processes_are_not_found_and_leave_no_trace_in_lineage(
    stubs: dict[str, Stub],
) -> None:
    gauss = (FIXTURES / "examples" / "transformations" / "gauss.cwl").read_text()
    private = await stubs["owner"].SubmitWorkgraph(
        pb.SubmitWorkgraphRequest(
            bundle=bundle(
                "wg.cwl",
                {
                    "wg.cwl": seeds_workgraph("private.cwl"),
                    "private.cwl": PRIVATE_WORKFLOW,
                    "gauss.cwl": gauss,
                },
            )
        )
    )
    shared = await stubs["outsider"].SubmitWorkgraph(
        pb.SubmitWorkgraphRequest(
            bundle=bundle("wg.cwl", {"wg.cwl": seeds_workgraph("gauss.cwl"), "gauss.cwl": gauss})
        )
    )
    recipe = private.plan[0].process_id
    tool = shared.plan[0].process_id
    tree = await stubs["owner"].GetProcessTree(pb.GetProcessTreeRequest(process_id=recipe))
    assert tool in {p.process_id for p in tree.processes}  # the same tool, stored once

    for rpc, request in (
        ("GetProcess", pb.GetProcessRequest(process_id=recipe)),
        ("GetProcessTree", pb.GetProcessTreeRequest(process_id=recipe)),
        ("ProcessLineage", pb.ProcessLineageRequest(process_id=recipe)),
    ):
        with pytest.raises(NotFound):
            await getattr(stubs["outsider"], rpc)(request)
    with pytest.raises(NotFound):  # the same answer as for a hash nobody stored
        await stubs["outsider"].GetProcess(pb.GetProcessRequest(process_id="ab" * 32))

    theirs = await stubs["outsider"].ProcessLineage(pb.ProcessLineageRequest(process_id=tool))
    assert list(theirs.composed_by) == []
    assert list(theirs.transformation_ids) == [shared.plan[0].transformation_id]  # theirs only
    ours = await stubs["owner"].ProcessLineage(pb.ProcessLineageRequest(process_id=tool))
    assert list(ours.composed_by) == [recipe]
    assert private.plan[0].transformation_id in ours.transformation_ids
    assert shared.plan[0].transformation_id not in ours.transformation_ids
    # Nor does publishing it, or naming it by hash in a document, make it the outsider's.
    with pytest.raises(NotFound):
        await stubs["outsider"].PublishProcess(
            pb.PublishProcessRequest(name="mine", version="1", process_id=recipe)
        )
    borrowing = seeds_workgraph(f"proc:sha256-{recipe}")
    with pytest.raises(InvalidArgument) as refused:
        await stubs["outsider"].SubmitWorkgraph(
            pb.SubmitWorkgraphRequest(bundle=bundle("wg.cwl", {"wg.cwl": borrowing}))
        )
    assert "not in the process store of VO 'atlas'" in str(refused.value)
    with pytest.raises(NotFound):
        await stubs["outsider"].GetProcess(pb.GetProcessRequest(process_id=recipe))
    reused = await stubs["colleague"].SubmitWorkgraph(
        pb.SubmitWorkgraphRequest(bundle=bundle("wg.cwl", {"wg.cwl": borrowing}), dry_run=True)
    )
    assert reused.plan[0].process_id == recipe  # its own VO runs it by hash
    got = await stubs["colleague"].GetProcess(pb.GetProcessRequest(process_id=recipe))
    assert "private recipe" in got.process.document_json
    assert (await stubs["service"].GetProcess(pb.GetProcessRequest(process_id=recipe))).process


# -- user jobs -----------------------------------------------------------------------------------

JOB = """
cwlVersion: v1.2
class: Workflow
$namespaces: {dirac: https://diracgrid.org/cwl#}
hints:
  dirac:Job:
    output_sandbox: ["*.log"]
    requirements_template: {cores: 2}
inputs:
  message: string
outputs: {}
steps:
  say:
    run: tools/echo.cwl
    in: {message: message}
    out: []
"""
ECHO = """
cwlVersion: v1.2
class: CommandLineTool
baseCommand: [echo]
inputs:
  message: {type: string, inputBinding: {position: 1}}
outputs: {}
"""


async def test_a_user_job_reaches_execution_as_its_submitter(
    stubs: dict[str, Stub], execution: ExecutionDouble
) -> None:
    calls = len(execution.calls)
    reply = await stubs["colleague"].SubmitJob(
        pb.SubmitJobRequest(
            bundle=bundle("job.cwl", {"job.cwl": JOB, "tools/echo.cwl": ECHO}),
            inputs_json=json.dumps({"message": "hello"}),
            labels={"purpose": "test"},
            request_id="job-1",
        )
    )
    ((kind, parcel, request_id),) = execution.calls[calls:]
    assert (kind, request_id) == ("create_user_parcel", "job-1")
    assert (parcel.vo, parcel.sub) == ("lhcb", "carl")
    assert parcel.process_id.hex() == reply.process_id
    assert parcel.parameters == {"message": "hello"}
    assert parcel.requirements_id == content_hash({"cores": 2})
    assert parcel.annotations["output_sandbox"] == ["*.log"]
    assert parcel.annotations["labels"] == {"purpose": "test"}
    claims = jwt.decode(execution.tokens[-1], options={"verify_signature": False})
    assert claims["sub"] == "carl"  # execution is called with the submitter's own token
    # A job's process is no VO's by hash (no transformation runs it): the dispatcher reads it.
    tree = await stubs["service"].GetProcessTree(
        pb.GetProcessTreeRequest(process_id=reply.process_id)
    )
    assert len(tree.processes) == 2 and tree.processes[-1].process_id == reply.process_id
    assert list(tree.processes[-1].child_process_ids) == [tree.processes[0].process_id]


async def test_a_plain_cwl_tool_is_a_job_with_every_default(
    stubs: dict[str, Stub], execution: ExecutionDouble
) -> None:
    calls = len(execution.calls)
    reply = await stubs["colleague"].SubmitJob(
        pb.SubmitJobRequest(
            bundle=bundle("echo.cwl", {"echo.cwl": ECHO}),
            inputs_json=json.dumps({"message": "hello"}),
            request_id="plain-1",
        )
    )
    ((kind, parcel, _),) = execution.calls[calls:]
    assert kind == "create_user_parcel"
    assert parcel.process_id.hex() == reply.process_id
    assert parcel.parameters == {"message": "hello"}
    assert "output_sandbox" not in parcel.annotations


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ((EXAMPLES / "simulation.cwl").read_text(), "hints.dirac:Workgraph"),
    ],
)
async def test_a_document_that_is_not_a_job_is_refused(
    stubs: dict[str, Stub], execution: ExecutionDouble, document: str, path: str
) -> None:
    calls = len(execution.calls)
    files = {"job.cwl": document}
    for tool in (EXAMPLES / "transformations").iterdir():
        files[f"transformations/{tool.name}"] = tool.read_text()
    with pytest.raises(InvalidArgument) as refused:
        await stubs["owner"].SubmitJob(pb.SubmitJobRequest(bundle=bundle("job.cwl", files)))
    assert [(v.field, v.description.split(":")[0]) for v in refused.value.violations] == [
        (path, "not-a-job")
    ]
    assert len(execution.calls) == calls


async def test_job_inputs_must_be_an_object(stubs: dict[str, Stub]) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await stubs["owner"].SubmitJob(
            pb.SubmitJobRequest(
                bundle=bundle("job.cwl", {"job.cwl": JOB, "tools/echo.cwl": ECHO}),
                inputs_json="[1]",
            )
        )
    assert [v.field for v in refused.value.violations] == ["inputs_json"]
