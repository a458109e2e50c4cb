"""Submission on both databases: the rows, the content store, references and the registry."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from cwl_support import catalogue, example, fixture, nested_bundle

from dxts.core.config import Defaults, DefinitionConfig, VODefaults
from dxts.core.db import Database, Isolation
from dxts.core.errors import AlreadyExists, InvalidArgument, NotFound
from dxts.core.ids import id_to_str
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.schema.accounting import transformation_log, workgraph_log
from dxts.core.schema.definition import (
    actions,
    compute_transformations,
    ownership,
    process_references,
    process_registry,
    processes,
    requirements,
    transformation_outputs,
    transformations,
    workgraphs,
)
from dxts.cwl.loading import Bundle
from dxts.cwl.problems import DocumentViolation
from dxts.definition.logic import registry
from dxts.definition.logic.submit import Submitted, submit_workgraph
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer


async def submit(database: Database, bundle: Bundle, **kwargs: Any) -> Submitted:
    options: dict[str, Any] = {"allow_unknown_plugins": True, **kwargs}
    with serving(rpc(DefinitionServiceServicer.SubmitWorkgraph)):
        return await submit_workgraph(
            database, bundle, vo="lhcb", sub="alice", catalogue=catalogue(), **options
        )


async def rows(database: Database, query: sa.Select[Any]) -> list[Any]:
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return list((await conn.execute(query)).all())


async def count(database: Database, table: sa.Table) -> int:
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return int(await conn.scalar(sa.select(sa.func.count()).select_from(table)) or 0)


async def members(database: Database, workgraph_id: bytes) -> list[Any]:
    return await rows(
        database,
        sa.select(transformations)
        .join(ownership, ownership.c.OwnershipID == transformations.c.OwnershipID)
        .where(ownership.c.WorkgraphID == workgraph_id)
        .order_by(transformations.c.TransformationID),
    )


async def test_mc_simulation_becomes_its_rows(database: Database) -> None:
    submitted = await submit(database, example("mc-simulation"), labels={"campaign": "2026"})
    plan = submitted.plan
    (workgraph,) = await rows(
        database, sa.select(workgraphs).where(workgraphs.c.WorkgraphID == plan.workgraph_id)
    )
    assert (workgraph.Type, workgraph.Status, workgraph.Hooks) == ("MCSimulation", "New", None)
    assert workgraph.Annotations == {
        "id": "MC_2026_Bs2JpsiPhi_Sim12",
        "label": "MC 2026 · Bs→J/ψφ · Sim12",
        "doc": "One billion events, simulated, reconstructed and merged.",
        "labels": {"campaign": "2026"},
    }
    steps = workgraph.StrippedSpec["steps"]
    assert all(step["run"].startswith("proc:sha256-") for step in steps.values())
    (owner,) = await rows(
        database, sa.select(ownership).where(ownership.c.WorkgraphID == plan.workgraph_id)
    )
    assert (owner.VO, owner.Sub) == ("lhcb", "alice")

    found = {row.Annotations["id"]: row for row in await members(database, plan.workgraph_id)}
    assert len(found) == 6
    assert {n: r.Kind for n, r in found.items()} == {
        "MCSimulation": "Compute",
        "MCReconstruction": "Compute",
        "MCMerge": "Compute",
        "MCSimulationRemoval": "Data",
        "MCReconstructionRemoval": "Data",
        "OutputReplication": "Data",
    }
    assert {r.Status for r in found.values()} == {"New"}
    assert {n: r.Annotations["initial_state"] for n, r in found.items()} == {
        "MCSimulation": "Active",
        "MCReconstruction": "Active",
        "MCMerge": "Active",
        "MCSimulationRemoval": "Stopped",
        "MCReconstructionRemoval": "Stopped",
        "OutputReplication": "Stopped",
    }
    ids = [r.TransformationID for r in found.values()]
    compute = await rows(
        database,
        sa.select(compute_transformations).where(
            compute_transformations.c.TransformationID.in_(ids)
        ),
    )
    assert {r.TransformationID for r in compute} == {
        found[n].TransformationID for n in ("MCSimulation", "MCReconstruction", "MCMerge")
    }
    outputs = {
        (r.TransformationID, r.Name): r
        for r in await rows(
            database,
            sa.select(transformation_outputs).where(
                transformation_outputs.c.TransformationID.in_(ids)
            ),
        )
    }
    assert {(name, r.Intermediate) for (_, name), r in outputs.items()} == {
        ("sim-files", True),
        ("reco-files", True),
        ("merged", False),
    }

    def edge(name: str) -> str:
        row = found[name]
        assert row.Feeder == "Edge"
        (output,) = [
            o
            for o in outputs.values()
            if id_to_str(o.TransformationOutputID) == row.FeederArgs["transformation_output_id"]
        ]
        producer = next(
            n for n, r in found.items() if r.TransformationID == output.TransformationID
        )
        return f"{producer}/{output.Name}"

    assert edge("MCReconstruction") == "MCSimulation/sim-files"
    assert edge("MCMerge") == "MCReconstruction/reco-files"
    assert edge("MCSimulationRemoval") == "MCSimulation/sim-files"
    assert edge("OutputReplication") == "MCMerge/merged"
    assert found["MCSimulation"].Feeder == "Seeds"
    assert found["MCSimulationRemoval"].Annotations["after"] == [
        id_to_str(found["MCReconstruction"].TransformationID)
    ]

    listed = await rows(
        database,
        sa.select(actions.c.State, actions.c.Position, actions.c.Action, actions.c.Args)
        .where(actions.c.TransformationID == found["MCReconstruction"].TransformationID)
        .order_by(actions.c.State, actions.c.Position),
    )
    assert [(r.State, r.Position, r.Action) for r in listed if r.State == "Finalizing"] == [
        ("Finalizing", 1, "NoInputProcessedTwice"),
        ("Finalizing", 2, "MergeHistograms"),
        ("Finalizing", 3, "MergeHistograms"),
    ]
    assert [r.Args for r in listed if r.State == "Finalizing"][1:] == [
        {"output": "BOOLEHIST"},
        {"output": "MOOREHIST"},
    ]
    assert [r.Action for r in listed if r.State == "Cancelling"] == [
        "CancelInFlightParcels",
        "RemoveOutputFiles",
        "RemoveIntermediateFiles",
        "CleanDatabaseEntries",
    ]
    approving = await rows(
        database,
        sa.select(actions.c.State, actions.c.Position, actions.c.Action, actions.c.Result)
        .where(actions.c.WorkgraphID == plan.workgraph_id)
        .order_by(actions.c.Position),
    )
    assert [tuple(r) for r in approving] == [
        ("Approving", 1, "CheckSuccessRate", None),
        ("Approving", 2, "EstimateResourceUsage", None),
        ("Approving", 3, "PPGApproval", None),
        ("Approving", 4, "ManualApproval", None),
    ]
    logged = await rows(
        database,
        sa.select(transformation_log.c.NewStatus).where(
            transformation_log.c.TransformationID.in_(ids)
        ),
    )
    assert [r.NewStatus for r in logged] == ["New"] * 6
    assert await rows(
        database,
        sa.select(workgraph_log.c.NewStatus).where(
            workgraph_log.c.WorkgraphID == plan.workgraph_id
        ),
    ) == [("New",)]


async def test_a_shared_tool_is_stored_once(database: Database) -> None:
    first = await submit(database, example("simulation"))
    before = await count(database, processes)
    second = await submit(database, example("simulation"))
    assert await count(database, processes) == before
    assert second.workgraph_id != first.workgraph_id
    assert [m.process_id for m in second.plan.members] == [m.process_id for m in first.plan.members]
    # sprucing reuses merge.cwl: only its own moore-spruce tool is new.
    await submit(database, example("sprucing"))
    assert await count(database, processes) == before + 1


async def test_a_nested_run_is_a_reference_and_lineage_answers_what_composes_it(
    database: Database,
) -> None:
    plan = (await submit(database, nested_bundle())).plan
    gauss = next(p for p in plan.processes if p.location == "tools/gauss.cwl")
    chain = plan.member("chain")
    stored = await rows(
        database,
        sa.select(process_references).where(
            process_references.c.ParentProcessID == chain.process_id
        ),
    )
    assert {r.ChildProcessID for r in stored} == set(
        next(p for p in plan.processes if p.process_id == chain.process_id).children
    )
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        lineage = await registry.lineage(conn, gauss.process_id)
        tree = await registry.process_tree(conn, chain.process_id)  # type: ignore[arg-type]
    assert chain.process_id in lineage.composed_by
    running = {t for t, _ in lineage.transformations}
    assert {chain.transformation_id, plan.member("again").transformation_id} <= running
    assert len(tree) == 3 and gauss.process_id in tree


async def test_a_stored_hash_and_a_published_name_resolve(database: Database) -> None:
    sim = (await submit(database, example("simulation"))).plan
    gauss, merge = sim.member("MCSimulation").process_id, sim.member("MCMerge").process_id
    assert gauss is not None and merge is not None
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        await registry.publish(
            conn, vo="lhcb", name="lhcb/merge", version="v3", process_id=merge, author="bob"
        )
    base = example("simulation")
    text = (
        (base.read("simulation.cwl") or "")
        .replace("transformations/gauss.cwl", f"proc:sha256-{gauss.hex()}")
        .replace("transformations/merge.cwl", "proc:lhcb/merge@v3")
    )
    bundle = Bundle.from_mapping(
        "s.cwl",
        {
            "s.cwl": text,
            "transformations/boole-moore.cwl": base.read("transformations/boole-moore.cwl") or "",
        },
    )
    plan = (await submit(database, bundle)).plan
    assert plan.member("MCSimulation").process_id == gauss
    assert plan.member("MCMerge").process_id == merge
    assert plan.stripped_spec["steps"]["MCMerge"]["run"] == f"proc:sha256-{merge.hex()}"

    missing = text.replace(gauss.hex(), "0" * 64).replace("lhcb/merge@v3", "lhcb/merge@v4")
    with pytest.raises(InvalidArgument) as raised:
        await submit(
            database,
            Bundle.from_mapping(
                "s.cwl",
                {
                    **{"s.cwl": missing},
                    "transformations/boole-moore.cwl": base.read("transformations/boole-moore.cwl")
                    or "",
                },
            ),
        )
    assert {
        (v.kind, v.field) for v in raised.value.violations if isinstance(v, DocumentViolation)
    } == {
        ("unresolved-run", "steps.MCSimulation.run"),
        ("unresolved-run", "steps.MCMerge.run"),
    }


async def test_a_refused_document_writes_nothing_and_lists_every_problem(
    database: Database,
) -> None:
    before = await count(database, workgraphs)
    with pytest.raises(InvalidArgument) as raised:
        await submit(database, fixture("invalid/several.cwl"), allow_unknown_plugins=False)
    assert len(raised.value.violations) == 5
    assert await count(database, workgraphs) == before


async def test_a_dry_run_returns_the_plan_and_writes_nothing(database: Database) -> None:
    counts = [await count(database, t) for t in (workgraphs, transformations, processes, actions)]
    submitted = await submit(database, example("sprucing"), dry_run=True)
    assert submitted.dry_run and len(submitted.plan.members) == 5
    assert [
        await count(database, t) for t in (workgraphs, transformations, processes, actions)
    ] == counts


async def test_configuration_fills_what_the_document_leaves_unset(database: Database) -> None:
    config = DefinitionConfig(
        vos={
            "lhcb": VODefaults(
                defaults=Defaults(
                    executing_identity="lhcb_mc", requirements_template={"priority": 1}
                ),
                types={
                    "Test": Defaults(
                        workgraph_hooks={"Active": {"hook": "Target"}},
                        requirements_template={"sites": ["CERN"]},
                    )
                },
            )
        }
    )
    before = await count(database, requirements)
    plan = (await submit(database, fixture("valid.cwl"), config=config)).plan
    assert plan.hooks == {"Active": {"hook": "Target"}}
    sim = plan.member("sim")
    assert sim.executing_identity == "lhcb_mc"
    assert sim.requirements_template == {"priority": 1, "sites": ["CERN"]}
    # Both members share one template row.
    assert await count(database, requirements) == before + 1
    (row,) = await rows(
        database,
        sa.select(compute_transformations.c.RequirementsTemplateID).where(
            compute_transformations.c.TransformationID == sim.transformation_id
        ),
    )
    assert row.RequirementsTemplateID == sim.requirements_template_id


async def test_the_registry(database: Database) -> None:
    plan = (await submit(database, example("analysis-production"))).plan
    first, second = (m.process_id for m in plan.members)
    assert first is not None and second is not None
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        await registry.publish(
            conn, vo="lhcb", name="ap/tuple", version="1.0", process_id=first, author="carol"
        )
        await registry.publish(
            conn, vo="lhcb", name="ap/tuple", version="1.0", process_id=first, author="carol"
        )
        await registry.publish(
            conn, vo="lhcb", name="ap/tuple", version="1.1", process_id=second, author="carol"
        )
        with pytest.raises(AlreadyExists):
            await registry.publish(
                conn, vo="lhcb", name="ap/tuple", version="1.0", process_id=second, author="carol"
            )
        with pytest.raises(NotFound):
            await registry.publish(
                conn,
                vo="lhcb",
                name="ap/tuple",
                version="2.0",
                process_id=b"\x01" * 32,
                author="carol",
            )
        with pytest.raises(InvalidArgument):
            await registry.publish(
                conn, vo="lhcb", name="-bad", version="v 1", process_id=first, author="carol"
            )
        assert await registry.resolve(conn, vo="lhcb", name="ap/tuple", version="1.1") == second
        with pytest.raises(NotFound):
            await registry.resolve(conn, vo="other", name="ap/tuple", version="1.1")
        versions = await registry.list_versions(conn, vo="lhcb", name="ap/tuple")
    assert [(v.version, v.process_id, v.author) for v in versions] == [
        ("1.0", first, "carol"),
        ("1.1", second, "carol"),
    ]
    assert await count(database, process_registry) >= 2
