"""Workgraphs written straight into rows in any state, and an engine over doubles, for the
lifecycle tests (and the end-to-end scenarios that follow them).

`build` writes one workgraph whose members, edges, `after` links, hooks and action lists are
given by name; `engine` builds the lifecycle over the module's database with `MemoryCounts`,
`MemoryExecution`, a local catalogue and a registry of the installed plugins plus `Script`ed
test plugins, whose results a test queues and whose calls it reads back in order.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from lifecycle_doubles import MemoryCounts, MemoryExecution

from dxts.core import content_store
from dxts.core.catalogue import CatalogueSettings, FileCatalogue, LocalFileCatalogue
from dxts.core.db import Database, Isolation, db_now
from dxts.core.identity import Identity
from dxts.core.ids import id_to_str, new_id
from dxts.core.plugins import (
    Accept,
    ActionResult,
    InputOverview,
    Operation,
    PluginArgs,
    Providers,
    Transformation,
    Workgraph,
    action,
    hook,
)
from dxts.core.plugins.points import PluginKind
from dxts.core.plugins.registry import Registry, analyse
from dxts.core.schema import accounting, definition
from dxts.definition.component import Lifecycle, build_lifecycle
from dxts.definition.logic.authorise import Caller
from dxts.definition.settings import LifecycleSettings

RC = Isolation.READ_COMMITTED
OPERATOR = Caller(Identity("lhcb", "olivia", frozenset({"operator"})))
PROCESS = {"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": ["true"]}
SEEDS = {"target_events": 1000, "events_per_seed": 10, "scouting_events": 20}


# -- scripted plugins ------------------------------------------------------------------------------


class Script:
    """What the scripted plugins answer, by key, and every call they received, in order."""

    def __init__(self) -> None:
        self.results: dict[str, list[Any]] = defaultdict(list)
        self.calls: list[tuple[str, Any]] = []
        # Gated actions wait for `opened`, having said they started with `entered`.
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()

    def queue(self, key: str, *results: Any) -> None:
        self.results[key].extend(results)

    def next(self, key: str, default: Any) -> Any:
        queued = self.results.get(key)
        if not queued:
            return default
        answer = queued.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def keys(self) -> list[str]:
        return [key for key, _ in self.calls]


class KeyArgs(PluginArgs):
    key: str


@action("Approving")
def scripted_approval(*, args: KeyArgs, workgraph: Workgraph, script: Script) -> ActionResult:
    script.calls.append((args.key, workgraph.status))
    return script.next(args.key, ActionResult.passed())


@action("Finalizing", "Archiving", "Cleaning")
def scripted_action(
    *, args: KeyArgs, transformation: Transformation, script: Script
) -> ActionResult:
    script.calls.append((args.key, transformation.status))
    default = ActionResult.done() if transformation.status != "Finalizing" else None
    return script.next(args.key, default or ActionResult.passed())


@action("Finalizing", "Archiving", "Cleaning")
async def gated_action(*, args: KeyArgs, script: Script) -> ActionResult:
    script.calls.append((args.key, None))
    script.entered.set()
    await script.opened.wait()
    return ActionResult.done() if args.key.startswith("done") else ActionResult.passed()


@hook("ScoutingToApproving")
def scripted_scout(
    *, args: KeyArgs, input_overviews: dict[uuid.UUID, InputOverview], script: Script
) -> Accept | dict[uuid.UUID, Operation]:
    script.calls.append((args.key, input_overviews))
    return script.next(args.key, {})


@hook("WorkgraphActive")
def scripted_workgraph_hook(
    *, args: KeyArgs, transformations: list[Transformation], script: Script
) -> dict[uuid.UUID, Operation]:
    script.calls.append((args.key, {t.annotations["id"]: t for t in transformations}))
    return script.next(args.key, {})


@hook("TransformationActive")
def scripted_member_hook(
    *, args: KeyArgs, transformation: Transformation, script: Script
) -> Operation | None:
    script.calls.append((args.key, transformation))
    return script.next(args.key, None)


SCRIPTED = {
    "hook": {
        "ScriptedScout": scripted_scout,
        "ScriptedWorkgraphHook": scripted_workgraph_hook,
        "ScriptedMemberHook": scripted_member_hook,
    },
    "action": {
        "ScriptedApproval": scripted_approval,
        "Scripted": scripted_action,
        "Gated": gated_action,
    },
}


def scripted(name: str, key: str) -> dict[str, Any]:
    """A hook binding for the Hooks column."""
    return {"hook": name, "args": {"key": key}}


def step(key: str) -> tuple[str, dict[str, Any]]:
    """A scripted action list entry."""
    return ("Scripted", {"key": key})


# -- rows ------------------------------------------------------------------------------------------


@dataclass
class Member:
    status: str = "Active"
    kind: str = "Compute"
    feeder: str = "Seeds"  # "Edge" reads `source`'s output
    source: str | None = None
    after: Sequence[str] = ()
    feeder_enabled: bool = True
    feeder_args: dict[str, Any] | None = None
    initial_state: str = "Active"
    hooks: dict[str, Any] | None = None
    actions: Mapping[str, Sequence[tuple[str, dict[str, Any] | None]]] = field(default_factory=dict)


@dataclass
class World:
    workgraph_id: bytes
    ids: dict[str, bytes]
    outputs: dict[str, bytes]
    actions: dict[str, int] = field(default_factory=dict)  # "<owner>/<state>/<pos>" → ActionID

    def uid(self, name: str) -> uuid.UUID:
        return uuid.UUID(bytes=self.ids[name])

    def name(self, transformation_id: bytes | uuid.UUID) -> str:
        key = (
            transformation_id.bytes
            if isinstance(transformation_id, uuid.UUID)
            else transformation_id
        )
        return next(n for n, t in self.ids.items() if t == key)


async def build(
    database: Database,
    members: Mapping[str, Member],
    *,
    status: str = "Active",
    hooks: dict[str, Any] | None = None,
    approving: Sequence[tuple[str, dict[str, Any] | None]] = (),
    annotations: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    updated_at: Any = None,
) -> World:
    wid, oid = new_id(), new_id()
    ids = {name: new_id() for name in members}
    outputs = {name: new_id() for name in members}
    world = World(wid, ids, outputs)
    async with database.transaction(RC) as conn:
        now = await db_now(conn)
        (process_id,) = await content_store.put_processes(conn, [PROCESS])
        (template_id,) = await content_store.put_requirements(conn, [{"cores": 1}])
        await conn.execute(
            sa.insert(definition.workgraphs).values(
                WorkgraphID=wid,
                Type="Test",
                Status=status,
                StrippedSpec=spec or {"class": "Workflow"},
                Annotations={"id": "world", **(annotations or {})},
                Hooks=hooks,
                UpdatedAt=updated_at or now,
            )
        )
        await conn.execute(
            sa.insert(definition.ownership).values(
                OwnershipID=oid, VO=OPERATOR.identity.vo, Sub="ursula", WorkgraphID=wid
            )
        )
        rows, actions = [], []
        for name, m in members.items():
            if m.feeder == "Edge":
                assert m.source is not None
                args: dict[str, Any] = {"transformation_output_id": id_to_str(outputs[m.source])}
            else:
                args = dict(SEEDS if m.feeder_args is None else m.feeder_args)
            notes: dict[str, Any] = {"id": name, "initial_state": m.initial_state}
            if m.after:
                notes["after"] = [id_to_str(ids[a]) for a in m.after]
            rows.append(
                {
                    "TransformationID": ids[name],
                    "OwnershipID": oid,
                    "Type": "Test",
                    "Kind": m.kind,
                    "Status": m.status,
                    "Feeder": m.feeder,
                    "FeederArgs": args,
                    "FeederEnabled": m.feeder_enabled,
                    "Packer": "PerInput",
                    "Annotations": notes,
                    "Hooks": m.hooks,
                    "UpdatedAt": now,
                }
            )
            for state, entries in m.actions.items():
                for position, (name_, args_) in enumerate(entries, start=1):
                    actions.append(
                        (
                            f"{name}/{state}/{position}",
                            None,
                            ids[name],
                            state,
                            position,
                            name_,
                            args_,
                        )
                    )
        await conn.execute(sa.insert(definition.transformations), rows)
        compute = [n for n, m in members.items() if m.kind == "Compute"]
        if compute:
            await conn.execute(
                sa.insert(definition.compute_transformations),
                [
                    {
                        "TransformationID": ids[n],
                        "ProcessID": process_id,
                        "RequirementsTemplateID": template_id,
                    }
                    for n in compute
                ],
            )
        await conn.execute(
            sa.insert(definition.transformation_outputs),
            [
                {
                    "TransformationOutputID": outputs[n],
                    "TransformationID": ids[n],
                    "Name": f"{n}-out",
                    "Intermediate": False,
                }
                for n in members
            ],
        )
        for position, (name_, args_) in enumerate(approving, start=1):
            actions.append(
                (f"workgraph/Approving/{position}", wid, None, "Approving", position, name_, args_)
            )
        if actions:
            await conn.execute(
                sa.insert(definition.actions),
                [
                    {
                        "WorkgraphID": w,
                        "TransformationID": t,
                        "State": s,
                        "Position": p,
                        "Action": a,
                        "Args": g,
                    }
                    for _, w, t, s, p, a, g in actions
                ],
            )
            found = await conn.execute(
                sa.select(
                    definition.actions.c.ActionID,
                    definition.actions.c.WorkgraphID,
                    definition.actions.c.TransformationID,
                    definition.actions.c.State,
                    definition.actions.c.Position,
                ).where(
                    sa.or_(
                        definition.actions.c.WorkgraphID == wid,
                        definition.actions.c.TransformationID.in_(list(ids.values())),
                    )
                )
            )
            for row in found:
                who = "workgraph" if row.WorkgraphID else world.name(bytes(row.TransformationID))
                world.actions[f"{who}/{row.State}/{row.Position}"] = int(row.ActionID)
    return world


async def build_standalone(database: Database, member: Member) -> bytes:
    tid, oid = new_id(), new_id()
    async with database.transaction(RC) as conn:
        now = await db_now(conn)
        await conn.execute(
            sa.insert(definition.ownership).values(
                OwnershipID=oid, VO="lhcb", Sub="ursula", WorkgraphID=None
            )
        )
        await conn.execute(
            sa.insert(definition.transformations).values(
                TransformationID=tid,
                OwnershipID=oid,
                Type="Test",
                Kind=member.kind,
                Status=member.status,
                Feeder=member.feeder,
                FeederArgs=dict(SEEDS if member.feeder_args is None else member.feeder_args),
                FeederEnabled=member.feeder_enabled,
                Packer="PerInput",
                Annotations={"id": "alone"},
                Hooks=member.hooks,
                UpdatedAt=now,
            )
        )
        rows = [
            {
                "WorkgraphID": None,
                "TransformationID": tid,
                "State": state,
                "Position": position,
                "Action": name,
                "Args": args,
            }
            for state, entries in member.actions.items()
            for position, (name, args) in enumerate(entries, start=1)
        ]
        if rows:
            await conn.execute(sa.insert(definition.actions), rows)
    return tid


# -- reads ---------------------------------------------------------------------------------------


async def statuses(database: Database, world: World) -> tuple[str, dict[str, str]]:
    async with database.transaction(RC) as conn:
        workgraph = await conn.scalar(
            sa.select(definition.workgraphs.c.Status).where(
                definition.workgraphs.c.WorkgraphID == world.workgraph_id
            )
        )
        rows = await conn.execute(
            sa.select(
                definition.transformations.c.TransformationID, definition.transformations.c.Status
            ).where(definition.transformations.c.TransformationID.in_(list(world.ids.values())))
        )
        return str(workgraph), {world.name(bytes(t)): s for t, s in rows}


async def members(database: Database, world: World) -> dict[str, Any]:
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(definition.transformations).where(
                definition.transformations.c.TransformationID.in_(list(world.ids.values()))
            )
        )
        return {world.name(bytes(r.TransformationID)): r for r in rows}


async def action_rows(database: Database, world: World) -> dict[str, Any]:
    by_id = {v: k for k, v in world.actions.items()}
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(definition.actions).where(definition.actions.c.ActionID.in_(list(by_id)))
        )
        return {by_id[int(r.ActionID)]: r for r in rows}


async def logs(database: Database, world: World) -> tuple[list[Any], list[Any]]:
    """(WorkgraphLog rows, TransformationLog rows with the member's name), in LogID order."""
    a = accounting
    async with database.transaction(RC) as conn:
        workgraph = await conn.execute(
            sa.select(a.workgraph_log)
            .where(a.workgraph_log.c.WorkgraphID == world.workgraph_id)
            .order_by(a.workgraph_log.c.LogID)
        )
        members_ = await conn.execute(
            sa.select(a.transformation_log)
            .where(a.transformation_log.c.TransformationID.in_(list(world.ids.values())))
            .order_by(a.transformation_log.c.LogID)
        )
        return list(workgraph), list(members_)


# -- the engine ----------------------------------------------------------------------------------


@dataclass
class Rig:
    lifecycle: Lifecycle
    counts: MemoryCounts
    execution: MemoryExecution
    script: Script
    catalogue: FileCatalogue

    async def sweep(self, world: World, times: int = 1) -> tuple[str, dict[str, str]]:
        for _ in range(times):
            assert await self.lifecycle.sweep.sweep_workgraph(world.workgraph_id)
        return await statuses(self.lifecycle.engine.database, world)

    def drained(self, world: World, *names: str) -> None:
        """Every input of these members Processed, every parcel Done (the exact counters)."""
        from dxts.core.states import InputStatus, ParcelStatus

        for name in names or tuple(world.ids):
            self.counts.set(world.uid(name), {InputStatus.PROCESSED: 4}, {ParcelStatus.DONE: 4})


async def rig(database: Database, directory: Path, **settings: Any) -> Rig:
    script = Script()
    providers = Providers()
    providers.add(Script, script)
    installed = Registry.discover()
    extra = []
    for kind, named in SCRIPTED.items():
        for name, function in named.items():
            plugin, problems = analyse(PluginKind(kind), name, function, "(tests)")
            assert plugin is not None, problems
            extra.append(plugin)
    registry = Registry([*installed, *extra], providers=providers)
    catalogue = LocalFileCatalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{directory}/catalogue.sqlite")
    )
    await catalogue.start()
    counts, execution = MemoryCounts(), MemoryExecution()
    lifecycle = await build_lifecycle(
        database,
        settings=LifecycleSettings(**{"archive_delay_s": 0.0, **settings}),
        registry=registry,
        counts=counts,
        execution=execution,
        catalogue=catalogue,
    )
    lifecycle.cleanups.insert(0, catalogue.close)
    return Rig(lifecycle, counts, execution, script, catalogue)
