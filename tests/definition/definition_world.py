"""Fixture workgraphs for the server-side tests, written straight into rows in any state.

`build_workgraph` writes one workgraph of three members — `simulate` (compute, fed by the Seeds
feeder from outside), `reconstruct` (compute, fed by an edge from simulate's output) and
`replicate` (data, fed by an edge from reconstruct's output, held until approval, `after`
reconstruct) — with an approving list, a Finalizing/Archiving/Cleaning list per member, and
every status set directly, so a test can start from any state without walking there.
`snapshot` reads every row a command could touch, to prove a refused command changed nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from dxts.core import content_store
from dxts.core.db import Database, Isolation, db_now
from dxts.core.ids import id_to_str, new_id
from dxts.core.plugins.protocols.lifecycle import Flushed
from dxts.core.schema import accounting, definition, execution
from dxts.definition.logic.execution import UserParcel

RC = Isolation.READ_COMMITTED
Stub = Any  # definition_pb2_grpc.DefinitionServiceAsyncStub exists for type checkers only
OWNER = ("lhcb", "ursula")
MEMBERS = ("simulate", "reconstruct", "replicate")
# Members of a started, scouting workgraph: one running, one paused, one held until approval.
HELD = {"simulate": "Active", "reconstruct": "Paused", "replicate": "New"}
PROCESS = {
    "cwlVersion": "v1.2",
    "class": "CommandLineTool",
    "baseCommand": ["true"],
    "inputs": {},
    "outputs": {},
}
REQUIREMENTS = {"cores": 1, "memory_gb": 2}
SEEDS_ARGS = {"target_events": 1000, "events_per_seed": 10, "scouting_events": 100}


@dataclass
class Fixture:
    workgraph_id: bytes
    ids: dict[str, bytes]  # member name → TransformationID
    outputs: dict[str, bytes]  # member name → its TransformationOutputID
    actions: dict[str, int] = field(default_factory=dict)  # "<owner>/<state>/<pos>" → ActionID

    @property
    def wid(self) -> str:
        return id_to_str(self.workgraph_id)

    def tid(self, name: str) -> str:
        return id_to_str(self.ids[name])


async def build_workgraph(
    database: Database,
    *,
    status: str = "New",
    members: dict[str, str] | str = "New",
    owner: tuple[str, str] = OWNER,
    approving: bool = True,
    initial: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    results: dict[str, str | None] | None = None,
    feeders_enabled: bool = True,
    halted: bool = False,
) -> Fixture:
    """One workgraph with its members in the given statuses (one status for all, or by name).

    `results` sets Actions.Result by "<owner>/<state>/<position>" key (owner: workgraph or a
    member name), e.g. {"workgraph/Approving/1": "Failed"}.
    """
    statuses = members if isinstance(members, dict) else dict.fromkeys(MEMBERS, members)
    initial_states = {
        "simulate": "Active",
        "reconstruct": "Active",
        "replicate": "Stopped",
        **(initial or {}),
    }
    wid, oid = new_id(), new_id()
    ids = {name: new_id() for name in MEMBERS}
    outputs = {name: new_id() for name in MEMBERS[:2]}
    fixture = Fixture(wid, ids, outputs)

    async with database.transaction(RC) as conn:
        now = await db_now(conn)
        (process_id,) = await content_store.put_processes(conn, [PROCESS])
        (template_id,) = await content_store.put_requirements(conn, [REQUIREMENTS])
        await conn.execute(
            sa.insert(definition.workgraphs).values(
                WorkgraphID=wid,
                Type="Test",
                Status=status,
                StrippedSpec={"class": "Workflow"},
                Annotations={
                    "id": "fixture",
                    **({"labels": labels} if labels else {}),
                    **({"halted": True} if halted else {}),
                },
                UpdatedAt=now,
            )
        )
        await conn.execute(
            sa.insert(definition.ownership).values(
                OwnershipID=oid, VO=owner[0], Sub=owner[1], WorkgraphID=wid
            )
        )
        feeders = {
            "simulate": ("Seeds", SEEDS_ARGS),
            "reconstruct": ("Edge", {"transformation_output_id": id_to_str(outputs["simulate"])}),
            "replicate": ("Edge", {"transformation_output_id": id_to_str(outputs["reconstruct"])}),
        }
        rows = []
        for name in MEMBERS:
            annotations: dict[str, Any] = {"id": name, "initial_state": initial_states[name]}
            if name == "replicate":
                annotations["after"] = [id_to_str(ids["reconstruct"])]
            feeder, args = feeders[name]
            rows.append(
                {
                    "TransformationID": ids[name],
                    "OwnershipID": oid,
                    "Type": "Test",
                    "Kind": "Data" if name == "replicate" else "Compute",
                    "Status": statuses[name],
                    "Feeder": feeder,
                    "FeederArgs": args,
                    "FeederEnabled": feeders_enabled,
                    "Packer": "PerInput",
                    "Annotations": annotations,
                    "UpdatedAt": now,
                }
            )
        await conn.execute(sa.insert(definition.transformations), rows)
        await conn.execute(  # the bookmarks execution's feeders committed
            sa.insert(execution.feeder_states),
            [
                {"TransformationID": ids[name], "Bookmark": {"bookmark": 7}, "UpdatedAt": now}
                for name in MEMBERS
            ],
        )
        await conn.execute(
            sa.insert(definition.compute_transformations),
            [
                {
                    "TransformationID": ids[n],
                    "ProcessID": process_id,
                    "RequirementsTemplateID": template_id if n == "simulate" else None,
                }
                for n in MEMBERS[:2]
            ],
        )
        await conn.execute(
            sa.insert(definition.transformation_outputs),
            [
                {
                    "TransformationOutputID": outputs[n],
                    "TransformationID": ids[n],
                    "Name": f"{n}-files",
                    "Intermediate": n == "simulate",
                }
                for n in MEMBERS[:2]
            ],
        )
        action_rows = []
        keys = []
        if approving:
            for position, (action, args) in enumerate(
                [
                    ("CheckSuccessRate", {"min_success_rate": 0.9}),
                    ("ManualApproval", {"role": "mc_production_manager"}),
                ],
                start=1,
            ):
                keys.append(f"workgraph/Approving/{position}")
                action_rows.append(
                    {
                        "WorkgraphID": wid,
                        "TransformationID": None,
                        "State": "Approving",
                        "Position": position,
                        "Action": action,
                        "Args": args,
                    }
                )
        for name in MEMBERS:
            for state, action in (
                ("Finalizing", "NoInputProcessedTwice"),
                ("Archiving", "CleanDatabaseEntries"),
                ("Cancelling", "CleanDatabaseEntries"),
            ):
                keys.append(f"{name}/{state}/1")
                action_rows.append(
                    {
                        "WorkgraphID": None,
                        "TransformationID": ids[name],
                        "State": state,
                        "Position": 1,
                        "Action": action,
                        "Args": None,
                    }
                )
        for key, row in zip(keys, action_rows, strict=True):
            row["Result"] = (results or {}).get(key)
        await conn.execute(sa.insert(definition.actions), action_rows)
        found = await conn.execute(
            sa.select(definition.actions).where(
                sa.or_(
                    definition.actions.c.WorkgraphID == wid,
                    definition.actions.c.TransformationID.in_(list(ids.values())),
                )
            )
        )
        names = {ids[n]: n for n in MEMBERS}
        for row in found:
            who = "workgraph" if row.WorkgraphID else names[bytes(row.TransformationID)]
            fixture.actions[f"{who}/{row.State}/{row.Position}"] = int(row.ActionID)
    return fixture


async def build_standalone(
    database: Database, *, status: str = "New", owner: tuple[str, str] = OWNER
) -> bytes:
    """A transformation with no workgraph (an Ownership row without one)."""
    tid, oid = new_id(), new_id()
    async with database.transaction(RC) as conn:
        now = await db_now(conn)
        await conn.execute(
            sa.insert(definition.ownership).values(
                OwnershipID=oid, VO=owner[0], Sub=owner[1], WorkgraphID=None
            )
        )
        await conn.execute(
            sa.insert(definition.transformations).values(
                TransformationID=tid,
                OwnershipID=oid,
                Type="Test",
                Kind="Compute",
                Status=status,
                Feeder="Seeds",
                FeederArgs=SEEDS_ARGS,
                FeederEnabled=True,
                Packer="PerInput",
                Annotations={"id": "alone"},
                UpdatedAt=now,
            )
        )
    return tid


async def snapshot(database: Database, fixture: Fixture) -> dict[str, list[Any]]:
    """Every row of the fixture a command may write, in a stable order."""
    ids = list(fixture.ids.values())
    d, a = definition, accounting
    queries = {
        "workgraph": sa.select(d.workgraphs).where(
            d.workgraphs.c.WorkgraphID == fixture.workgraph_id
        ),
        "members": sa.select(d.transformations)
        .where(d.transformations.c.TransformationID.in_(ids))
        .order_by(d.transformations.c.TransformationID),
        "actions": sa.select(d.actions)
        .where(
            sa.or_(
                d.actions.c.WorkgraphID == fixture.workgraph_id,
                d.actions.c.TransformationID.in_(ids),
            )
        )
        .order_by(d.actions.c.ActionID),
        "workgraph_log": sa.select(a.workgraph_log)
        .where(a.workgraph_log.c.WorkgraphID == fixture.workgraph_id)
        .order_by(a.workgraph_log.c.LogID),
        "transformation_log": sa.select(a.transformation_log)
        .where(a.transformation_log.c.TransformationID.in_(ids))
        .order_by(a.transformation_log.c.LogID),
    }
    async with database.transaction(RC) as conn:
        return {name: list((await conn.execute(query)).all()) for name, query in queries.items()}


async def statuses(database: Database, fixture: Fixture) -> tuple[str, dict[str, str]]:
    """(workgraph status, member name → status)."""
    names = {v: k for k, v in fixture.ids.items()}
    async with database.transaction(RC) as conn:
        workgraph = await conn.scalar(
            sa.select(definition.workgraphs.c.Status).where(
                definition.workgraphs.c.WorkgraphID == fixture.workgraph_id
            )
        )
        rows = await conn.execute(
            sa.select(
                definition.transformations.c.TransformationID, definition.transformations.c.Status
            ).where(definition.transformations.c.TransformationID.in_(list(names)))
        )
        return str(workgraph), {names[bytes(t)]: s for t, s in rows}


async def member_rows(database: Database, fixture: Fixture) -> dict[str, Any]:
    names = {v: k for k, v in fixture.ids.items()}
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(definition.transformations).where(
                definition.transformations.c.TransformationID.in_(list(names))
            )
        )
        return {names[bytes(r.TransformationID)]: r for r in rows}


async def log_rows(database: Database, fixture: Fixture) -> tuple[list[Any], list[Any]]:
    """(WorkgraphLog rows, TransformationLog rows) of the fixture, in LogID order."""
    snap = await snapshot(database, fixture)
    return snap["workgraph_log"], snap["transformation_log"]


async def action_results(database: Database, fixture: Fixture) -> dict[str, Any]:
    """ "<owner>/<state>/<pos>" → (Result, Author)."""
    by_id = {v: k for k, v in fixture.actions.items()}
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(
                definition.actions.c.ActionID,
                definition.actions.c.Result,
                definition.actions.c.Author,
            ).where(definition.actions.c.ActionID.in_(list(by_id)))
        )
        return {by_id[int(i)]: (r, a) for i, r, a in rows}


class ExecutionDouble:
    """Records what definition forwards; `fail` makes every call raise it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.tokens: list[str | None] = []
        self.fail: Exception | None = None
        self.flushed = Flushed()  # what a flush answers

    def factory(self, token: str | None) -> ExecutionDouble:
        self.tokens.append(token)
        return self

    def _record(self, *call: Any) -> None:
        if self.fail is not None:
            raise self.fail
        self.calls.append(call)

    async def flush(self, transformation_id: bytes, *, request_id: str) -> Flushed:
        self._record("flush", transformation_id, request_id)
        return self.flushed

    async def cancel_in_flight(
        self, transformation_id: bytes, *, request_id: str, reason: str
    ) -> None:
        self._record("cancel_in_flight", transformation_id, request_id)

    async def write_off_waiting(
        self, transformation_id: bytes, *, request_id: str, reason: str
    ) -> None:
        self._record("write_off_waiting", transformation_id, request_id)

    async def create_user_parcel(self, parcel: UserParcel, *, request_id: str) -> bytes:
        self._record("create_user_parcel", parcel, request_id)
        return new_id()

    async def reset_feeders(
        self, transformation_ids: Sequence[bytes], *, clear_bookmarks: bool, request_id: str
    ) -> None:
        self._record("reset_feeders", tuple(transformation_ids), clear_bookmarks)
