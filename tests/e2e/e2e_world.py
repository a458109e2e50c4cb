"""The end-to-end world: every component as a real gRPC server over one database, the null
adaptors as backends, operators driving it through the definition and execution services.

`running(database, directory, ...)` composes what `dxts up` composes (reusing its `Stack`),
with two null adaptors (compute and data; `more_null` adds others) instead of the local ones,
the sweeps paced in tenths of a second, and one plugin registry holding the installed plugins
(the scenarios' own among them: tests/e2e_plugins) plus `e2e_plugins.JoinByName`. The
definition service validates submissions against the same registry.
`e2e_cluster.running_cluster` gives the same `World` over every component as its own process,
as the chart deploys them.

Reads go straight to the database (a test may look anywhere); every change goes through the
services. `check_invariants` is what every scenario ends with.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
import yaml
from e2e_plugins import OutputNames, scenario_plugins

from dxts.accounting.component import build_accounting
from dxts.accounting.settings import AccountingSettings
from dxts.backends.edge.servicer import adaptor_service
from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.cli.up import Stack
from dxts.core.catalogue import CatalogueSettings, FileCatalogue, open_catalogue
from dxts.core.counters import DATA_PARCELS, TRANSFORMATION
from dxts.core.db import Database, Isolation
from dxts.core.grpc import DevKeys, channel
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.grpc.ports import free_port
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.locks import LockManager
from dxts.core.logs import STATE_CHANGE
from dxts.core.plugins import Providers, Registry
from dxts.core.schema import accounting, definition, execution
from dxts.core.state_machines import TRANSFORMATION as T_MACHINE
from dxts.core.state_machines import WORKGRAPH as W_MACHINE
from dxts.core.states import (
    ActionResult,
    InputStatus,
    Kind,
    ParcelStatus,
    TransformationStatus,
    WorkgraphStatus,
)
from dxts.definition.component import build_definition, build_lifecycle
from dxts.definition.settings import DefinitionSettings, LifecycleSettings
from dxts.dispatcher.component import build_dispatcher
from dxts.dispatcher.settings import BackendConfig, DispatcherSettings
from dxts.execution.component import build_execution
from dxts.execution.settings import ExecutionSettings
from dxts.v1 import (
    common_pb2,
    definition_pb2,
    definition_pb2_grpc,
    execution_pb2,
    execution_pb2_grpc,
)

RC = Isolation.READ_COMMITTED
W, T, I, P = WorkgraphStatus, TransformationStatus, InputStatus, ParcelStatus  # noqa: E741
PACE_S = 0.2  # every sweep's pause
WAIT_S = 60.0  # the longest any scenario waits for one state (a loaded machine is slow)
STOP_S = 30.0  # the longest the components may take to stop
VO = "lhcb"
TERMINAL_INPUTS = frozenset({I.PROCESSED, I.SPLIT, I.NOT_PROCESSED})
TERMINAL_PARCELS = frozenset({P.DONE, P.PARTIALLY_DONE, P.FAILED, P.CANCELLED})
R = TypeVar("R")


# -- the document -------------------------------------------------------------------------------

# The one tool every step runs (the null adaptor runs nothing): a file output `out` and the
# status report, so that the recorder reads the null adaptor's reports.
TOOL: dict[str, Any] = {
    "class": "CommandLineTool",
    "baseCommand": ["true"],
    "inputs": {
        "files": {"type": {"type": "array", "items": ["File", "string"]}},
    },
    "outputs": {
        "out": {"type": "File", "outputBinding": {"glob": "out.txt"}},
        "status-report": {"type": "File", "outputBinding": {"glob": "status-report.json"}},
    },
}


def tool(*extra_inputs: str) -> dict[str, Any]:
    """TOOL, with more inputs of the same type (a joining step's partner)."""
    body = json.loads(json.dumps(TOOL))
    for name in extra_inputs:
        body["inputs"][name] = {"type": {"type": "array", "items": ["File", "string"]}}
    return body


def step(
    source: str,
    *,
    packer: str = "PerInput",
    group_size: int | None = None,
    actions: Mapping[str, Sequence[str | Mapping[str, Any]]] | None = None,
    **hint: Any,
) -> dict[str, Any]:
    """A step of TOOL whose `files` input comes from `source` (a fed input or step/out)."""
    args: dict[str, Any] = {"input_parameter": "files"}
    if group_size is not None:
        args["group_size"] = group_size
    transformation: dict[str, Any] = {"packer": {"name": packer, "args": args}, **hint}
    if actions:
        transformation["actions"] = {
            state: [{"action": a} if isinstance(a, str) else dict(a) for a in listed]
            for state, listed in actions.items()
        }
    return {
        "hints": {"dirac:Transformation": transformation},
        "run": tool(),
        "in": {"files": source},
        "out": ["out", "status-report"],
    }


def seeds(seeds: int, **args: Any) -> dict[str, Any]:
    """A workflow input fed by Seeds, one event per seed (`seeds` of them asked for)."""
    return {
        "type": {"type": "array", "items": ["File", "string"]},
        "dirac:Feeder": {
            "name": "Seeds",
            "args": {"target_events": seeds, "events_per_seed": 1, **args},
        },
    }


def listed(count: int, prefix: str) -> dict[str, Any]:
    """A workflow input fed by List: `count` files /e2e/<prefix>/<n>.raw."""
    return {
        "type": {"type": "array", "items": ["File", "string"]},
        "dirac:Feeder": {
            "name": "List",
            "args": {
                "inputs": [
                    {"lfn": f"/lhcb/e2e/{prefix}/{n}.raw", "lfn_size": 100} for n in range(count)
                ]
            },
        },
    }


def workgraph(
    inputs: Mapping[str, Any],
    steps: Mapping[str, Any],
    outputs: Mapping[str, str],
    **hint: Any,
) -> dict[str, Any]:
    """A workgraph document: `outputs` maps a workflow output id to its step/out."""
    return {
        "cwlVersion": "v1.2",
        "class": "Workflow",
        "$namespaces": {"dirac": "https://diracgrid.org/cwl#"},
        "hints": {"dirac:Workgraph": {"schema_version": "1.0", **hint}},
        "inputs": dict(inputs),
        "steps": dict(steps),
        "outputs": {
            name: {"type": "File", "outputSource": source} for name, source in outputs.items()
        },
    }


def selection(*statuses: InputStatus) -> execution_pb2.InputSelection:
    """Every input of a transformation in one of `statuses` (ResetInputs, WriteOffInputs)."""
    return execution_pb2.InputSelection(
        statuses=[enum_to_proto(s) for s in statuses]  # type: ignore[misc]
    )


def bundle(document: Mapping[str, Any], name: str = "workgraph.cwl") -> common_pb2.DocumentBundle:
    return common_pb2.DocumentBundle(
        main_path=name, files={name: yaml.safe_dump(dict(document), sort_keys=False).encode()}
    )


# -- the running world ------------------------------------------------------------------------


@dataclass
class Submitted:
    """A submitted workgraph: its id, and its members' ids and output ids by name."""

    workgraph_id: str
    members: dict[str, str]  # step or declaration name → TransformationID
    outputs: dict[str, str]  # "step/output" → TransformationOutputID

    @property
    def wid(self) -> bytes:
        return id_from_str(self.workgraph_id)

    def tid(self, name: str) -> bytes:
        return id_from_str(self.members[name])

    def name_of(self, transformation_id: bytes) -> str:
        text = id_to_str(transformation_id)
        return next(name for name, tid in self.members.items() if tid == text)


@dataclass
class World:
    """What a scenario drives and reads, whatever runs the components: `InProcessWorld` (one
    process, `running`) or `e2e_cluster.ClusterWorld` (each component its own process)."""

    database: Database
    data_dir: Path
    catalogue: FileCatalogue
    names: OutputNames
    definition: Any  # DefinitionServiceStub (operator)
    execution: Any  # ExecutionServiceStub (operator)
    _channels: list[Any] = field(default_factory=list)
    # The `dxts` command's options that reach this world's services as the operator.
    cli: list[str] = field(default_factory=list)

    # -- the null adaptors --------------------------------------------------------------------

    async def backend_counters(self, backend: str = "null") -> dict[str, int]:
        """The adaptor's own tallies (its Describe counters): submits, accepted, started,
        repeated_submits, refused, in_flight."""
        raise NotImplementedError

    async def configure_null(self, backend: str = "null", **changes: Any) -> None:
        """Change the adaptor's settings (NullSettings fields) from now on; only while it
        holds nothing in flight (a separate adaptor is restarted with them)."""
        raise NotImplementedError

    # -- operators ------------------------------------------------------------------------------

    async def submit(self, document: Mapping[str, Any]) -> Submitted:
        return await self.submit_bundle(bundle(document))

    async def submit_bundle(self, files: common_pb2.DocumentBundle) -> Submitted:
        """Submit a bundle as it is (a document with the tools beside it, say)."""
        reply = await self.definition.SubmitWorkgraph(
            definition_pb2.SubmitWorkgraphRequest(request_id=str(uuid.uuid4()), bundle=files)
        )
        got = await self.definition.GetWorkgraph(
            definition_pb2.GetWorkgraphRequest(workgraph_id=reply.workgraph_id)
        )
        members = {m.step: m.transformation_id for m in got.members}
        outputs = {
            f"{m.step}/{o.name}": o.transformation_output_id for m in got.members for o in m.outputs
        }
        self.names.update(outputs)
        return Submitted(reply.workgraph_id, members, outputs)

    async def start(self, wg: Submitted) -> None:
        await self.definition.StartWorkgraph(
            definition_pb2.StartWorkgraphRequest(
                request_id=str(uuid.uuid4()), workgraph_id=wg.workgraph_id, reason="e2e"
            )
        )

    async def call(self, method: str, **fields: Any) -> Any:
        """A definition RPC with a fresh request id: `await world.call("HaltWorkgraph",
        workgraph_id=...)`."""
        request_type = getattr(definition_pb2, f"{method}Request")
        return await getattr(self.definition, method)(
            request_type(request_id=str(uuid.uuid4()), **fields)
        )

    async def call_execution(self, method: str, **fields: Any) -> Any:
        request_type = getattr(execution_pb2, f"{method}Request")
        return await getattr(self.execution, method)(
            request_type(request_id=str(uuid.uuid4()), **fields)
        )

    async def actions(self, wg: Submitted) -> dict[str, Any]:
        """Every action of the workgraph and its members by "<owner>/<state>/<position>"
        (owner: "workgraph" or the member's name)."""
        async with self.database.transaction(RC) as conn:
            rows = await conn.execute(
                sa.select(definition.actions).where(
                    sa.or_(
                        definition.actions.c.WorkgraphID == wg.wid,
                        definition.actions.c.TransformationID.in_([wg.tid(n) for n in wg.members]),
                    )
                )
            )
            found = {}
            for row in rows:
                owner = (
                    "workgraph"
                    if row.WorkgraphID is not None
                    else wg.name_of(bytes(row.TransformationID))
                )
                found[f"{owner}/{row.State}/{row.Position}"] = row
            return found

    async def force(self, action_id: int, result: ActionResult, message: str) -> None:
        await self.call(
            "ForceAction",
            action_id=action_id,
            result=enum_to_proto(result),  # type: ignore[arg-type]
            message=message,
        )

    # -- reads ----------------------------------------------------------------------------------

    async def statuses(self, wg: Submitted) -> tuple[str, dict[str, str]]:
        async with self.database.transaction(RC) as conn:
            status = await conn.scalar(
                sa.select(definition.workgraphs.c.Status).where(
                    definition.workgraphs.c.WorkgraphID == wg.wid
                )
            )
            rows = await conn.execute(
                sa.select(
                    definition.transformations.c.TransformationID,
                    definition.transformations.c.Status,
                ).where(
                    definition.transformations.c.TransformationID.in_(
                        [wg.tid(n) for n in wg.members]
                    )
                )
            )
            return str(status), {wg.name_of(bytes(t)): str(s) for t, s in rows}

    async def members(self, wg: Submitted) -> dict[str, Any]:
        async with self.database.transaction(RC) as conn:
            rows = await conn.execute(
                sa.select(definition.transformations).where(
                    definition.transformations.c.TransformationID.in_(
                        [wg.tid(n) for n in wg.members]
                    )
                )
            )
            return {wg.name_of(bytes(r.TransformationID)): r for r in rows}

    async def feeders_on(self, wg: Submitted) -> dict[str, bool]:
        """Each member's feeder: on while its switch (definition's FeederEnabled) is on and it
        has not said NoMoreInputs (execution's FeederStates row)."""
        t, f = definition.transformations, execution.feeder_states
        async with self.database.transaction(RC) as conn:
            rows = await conn.execute(
                sa.select(t.c.TransformationID, t.c.FeederEnabled, f.c.Exhausted)
                .select_from(t.outerjoin(f, f.c.TransformationID == t.c.TransformationID))
                .where(t.c.TransformationID.in_([wg.tid(n) for n in wg.members]))
            )
            return {
                wg.name_of(bytes(r.TransformationID)): bool(r.FeederEnabled) and not r.Exhausted
                for r in rows
            }

    async def inputs(self, wg: Submitted, name: str) -> list[Any]:
        async with self.database.transaction(RC) as conn:
            rows = await conn.execute(
                sa.select(execution.inputs)
                .where(execution.inputs.c.TransformationID == wg.tid(name))
                .order_by(execution.inputs.c.InputID)
            )
            return list(rows)

    async def parcels(self, wg: Submitted, name: str) -> list[Any]:
        """The member's Parcels rows, each with `Directed`: where execution directs it (its
        DirectedParcels row), None for a parcel the dispatcher's policy places."""
        directed = execution.directed_parcels
        async with self.database.transaction(RC) as conn:
            rows = await conn.execute(
                sa.select(execution.parcels, directed.c.Backend.label("Directed"))
                .select_from(
                    execution.parcels.outerjoin(
                        directed, directed.c.ParcelID == execution.parcels.c.ParcelID
                    )
                )
                .where(execution.parcels.c.TransformationID == wg.tid(name))
                .order_by(execution.parcels.c.ParcelID)
            )
            return list(rows)

    async def produced(self, wg: Submitted, output: str) -> list[str]:
        """The LFNs produced under "step/output" (its ParcelOutputs), in output order."""
        out = execution.parcel_outputs
        async with self.database.transaction(RC) as conn:
            rows = await conn.execute(
                sa.select(out.c.LFN)
                .where(out.c.TransformationOutputID == id_from_str(wg.outputs[output]))
                .order_by(out.c.OutputID)
            )
            return [str(lfn) for (lfn,) in rows]

    async def census(self, wg: Submitted) -> dict[str, dict[str, Counter[str]]]:
        """Per member: inputs and parcels by status (COUNT(*) of the rows)."""
        found: dict[str, dict[str, Counter[str]]] = {}
        async with self.database.transaction(RC) as conn:
            for name in wg.members:
                tid = wg.tid(name)
                counted = {}
                for label, table in (("inputs", execution.inputs), ("parcels", execution.parcels)):
                    rows = await conn.execute(
                        sa.select(table.c.Status, sa.func.count())
                        .where(table.c.TransformationID == tid)
                        .group_by(table.c.Status)
                    )
                    counted[label] = Counter({str(s): int(n) for s, n in rows})
                found[name] = counted
        return found

    async def logs(self, wg: Submitted) -> tuple[list[Any], dict[str, list[Any]]]:
        """(WorkgraphLog rows, TransformationLog rows per member), in LogID order."""
        a = accounting
        async with self.database.transaction(RC) as conn:
            workgraph_rows = await conn.execute(
                sa.select(a.workgraph_log)
                .where(a.workgraph_log.c.WorkgraphID == wg.wid)
                .order_by(a.workgraph_log.c.LogID)
            )
            member_rows = await conn.execute(
                sa.select(a.transformation_log)
                .where(a.transformation_log.c.TransformationID.in_([wg.tid(n) for n in wg.members]))
                .order_by(a.transformation_log.c.LogID)
            )
            per_member: dict[str, list[Any]] = defaultdict(list)
            for row in member_rows:
                per_member[wg.name_of(bytes(row.TransformationID))].append(row)
            return list(workgraph_rows), dict(per_member)

    async def describe(self, wg: Submitted) -> str:
        """Where the workgraph is, for a failure message."""
        status, members = await self.statuses(wg)
        census = await self.census(wg)
        feeders = await self.feeders_on(wg)
        lines = [f"workgraph {status}"]
        for name, state in sorted(members.items()):
            lines.append(
                f"  {name}: {state} feeder={'on' if feeders[name] else 'off'} "
                f"inputs={dict(census[name]['inputs'])} parcels={dict(census[name]['parcels'])}"
            )
        async with self.database.transaction(RC) as conn:
            reading = await TRANSFORMATION.read(
                conn, {"TransformationID": [wg.tid(n) for n in wg.members]}
            )
        counted: dict[str, dict[str, int]] = defaultdict(dict)
        for (tid, entity, status), values in reading.items():
            counted[wg.name_of(bytes(tid))][f"{entity}.{status}"] = values["Count"]
        lines.append(f"  counters: {dict(counted)}")
        lines += await self._withheld(wg)
        workgraph_log, _ = await self.logs(wg)
        lines += [
            f"  log: {r.OldStatus} → {r.NewStatus} by {r.Author}"
            for r in workgraph_log
            if r.EventType == STATE_CHANGE
        ]
        failures = [r.Message for r in workgraph_log if r.EventType == "PluginFailed"]
        if failures:
            lines.append(f"  plugin failures: {failures[-3:]}")
        return "\n".join(lines)

    async def _withheld(self, wg: Submitted) -> list[str]:
        """The Unassigned inputs a packer withheld (DelayInput), per member: an input waiting
        out its delay looks, in the counters, like one nothing will ever pack."""
        c = execution.inputs.c
        async with self.database.transaction(RC) as conn:
            rows = await conn.execute(
                sa.select(c.TransformationID, sa.func.count(), sa.func.max(c.DelayedUntil))
                .where(
                    c.TransformationID.in_([wg.tid(n) for n in wg.members]),
                    c.Status == InputStatus.UNASSIGNED.value,
                    c.DelayedUntil.is_not(None),
                )
                .group_by(c.TransformationID)
            )
            return [
                f"  withheld: {wg.name_of(bytes(tid))} {n} Unassigned until {until} (UTC)"
                for tid, n, until in rows
            ]

    async def until(
        self,
        what: str,
        check: Callable[[], Awaitable[R]],
        wg: Submitted | None = None,
        timeout_s: float = WAIT_S,
    ) -> R:
        """Poll `check` until it returns something true; fail after `timeout_s` saying `what`
        was awaited and where the workgraph is."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = await check()
            if found:
                return found
            if time.monotonic() > deadline:
                where = await self.describe(wg) if wg is not None else ""
                raise AssertionError(f"timed out waiting for {what}\n{where}")
            await asyncio.sleep(PACE_S / 2)

    async def reach(self, wg: Submitted, *states: str, timeout_s: float = WAIT_S) -> str:
        """Wait for the workgraph to be in one of `states`; returns it."""

        async def check() -> str | None:
            status, _ = await self.statuses(wg)
            return status if status in states else None

        return await self.until(f"workgraph in {states}", check, wg, timeout_s)

    async def member_reaches(self, wg: Submitted, name: str, *states: str) -> str:
        async def check() -> str | None:
            _, members = await self.statuses(wg)
            return members[name] if members[name] in states else None

        return await self.until(f"{name} in {states}", check, wg)

    async def restart_null(self) -> None:
        """The compute null adaptor restarted on its address, as a new process: it knows
        nothing of what the old one accepted (it kept its identifiers in memory)."""
        server = self.stack.servers["null"]
        await server.stop(grace=0)
        await self.null.stop()
        keys = DevKeys.load_or_create(self.data_dir)
        self.null = await _serve_null(self.stack, self.null.settings, keys, port=server.port)

    async def close(self) -> None:
        for opened in self._channels:
            await opened.close()
        await self.catalogue.close()


@dataclass(kw_only=True)
class InProcessWorld(World):
    """The components composed in this process (as `dxts up` composes them)."""

    stack: Stack
    null: NullAdaptor
    null_data: NullAdaptor
    registry: Registry
    more_null: list[NullAdaptor] = field(default_factory=list)

    def _adaptor(self, backend: str) -> NullAdaptor:
        adaptors = (self.null, self.null_data, *self.more_null)
        return next(a for a in adaptors if a.settings.name == backend)

    async def backend_counters(self, backend: str = "null") -> dict[str, int]:
        return dict((await self._adaptor(backend).describe()).counters)

    async def configure_null(self, backend: str = "null", **changes: Any) -> None:
        adaptor = self._adaptor(backend)
        assert not (await adaptor.describe()).counters["in_flight"], "parcels in flight"
        for name, value in changes.items():
            setattr(adaptor.settings, name, value)

    async def close(self) -> None:
        for opened in self._channels:
            await opened.close()
        self._channels.clear()
        await self.stack.stop()
        await super().close()


async def _serve_null(
    stack: Stack, settings: NullSettings, keys: DevKeys, port: int = 0
) -> NullAdaptor:
    adaptor = NullAdaptor(settings)
    await adaptor.start()
    stack.on_stop(adaptor.stop)
    verifier = keys.verifier()
    await stack.serve(settings.name, [adaptor_service(adaptor)], verifier, None, port=port)
    return adaptor


@contextlib.asynccontextmanager
async def running(
    database: Database,
    directory: Path,
    *,
    null: NullSettings | None = None,
    null_data: NullSettings | None = None,
    more_null: Sequence[NullSettings] = (),
    archive_delay_s: float = 3600.0,
    status_interval_s: float = 2 * PACE_S,
    lost_grace_s: float = 300.0,
    lease_s: float = 300.0,
) -> AsyncIterator[InProcessWorld]:
    """Every component over `database` (schema created), served on port 0; stopped after.
    `directory` (existing) holds the development key pair and the catalogue. `more_null` are
    further null adaptors, configured after `null` and `null_data`: a kind's parcels still go to
    the first of that kind unless one is directed elsewhere."""
    keys = DevKeys.load_or_create(directory)
    verifier = keys.verifier()
    catalogue = await open_catalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{directory / 'catalogue.sqlite'}")
    )
    names = OutputNames()
    providers = Providers()
    providers.add(OutputNames, names)
    registry = Registry([*Registry.discover(), *scenario_plugins()], providers=providers)
    stack = Stack()
    try:
        compute = await _serve_null(stack, null or NullSettings(name="null", outputs=["out"]), keys)
        data = await _serve_null(
            stack, null_data or NullSettings(name="null-data", kind=Kind.DATA), keys
        )
        more = [await _serve_null(stack, settings, keys) for settings in more_null]
        backends = [
            BackendConfig(
                name=adaptor.settings.name,
                address=stack.address(adaptor.settings.name),
                kind=adaptor.settings.kind,
                adaptor="null",
            )
            for adaptor in (compute, data, *more)
        ]
        locks = LockManager(database)
        stack.on_stop(locks.dispose)
        port = {name: free_port() for name in ("definition", "execution", "accounting")}
        address = {name: f"127.0.0.1:{number}" for name, number in port.items()}

        built_definition = await build_definition(
            database,
            settings=DefinitionSettings(data_dir=directory, execution_address=address["execution"]),
            catalogue=registry,
        )
        stack.on_stop(built_definition.stop)
        await stack.serve(
            "definition", built_definition.services, verifier, database, port=port["definition"]
        )
        built_accounting = await build_accounting(
            database,
            settings=AccountingSettings(
                definition_address=address["definition"], data_dir=directory
            ),
            locks=locks,
        )
        stack.on_stop(built_accounting.stop)
        await stack.serve(
            "accounting", built_accounting.services, verifier, database, port=port["accounting"]
        )
        lifecycle = await build_lifecycle(
            database,
            settings=LifecycleSettings(
                accounting_address=address["accounting"],
                interval_s=PACE_S,
                archive_delay_s=archive_delay_s,
            ),
            execution_address=address["execution"],
            data_dir=directory,
            registry=registry,
            catalogue=catalogue,
            locks=locks,
        )
        stack.on_stop(lifecycle.stop)
        built_execution = await build_execution(
            database,
            settings=ExecutionSettings(
                definition_address=address["definition"],
                data_dir=directory,
                feed_interval_s=PACE_S,
                pack_interval_s=PACE_S,
                record_interval_s=PACE_S / 2,
                failed_inputs_interval_s=PACE_S,
                stop_grace_s=1.0,
            ),
            registry=registry,
            catalogue=catalogue,
            locks=locks,
        )
        stack.on_stop(built_execution.stop)
        await stack.serve(
            "execution", built_execution.services, verifier, database, port=port["execution"]
        )
        await lifecycle.start()
        dispatcher = await build_dispatcher(
            database,
            settings=DispatcherSettings(
                backends=backends,
                definition_address=address["definition"],
                execution_address=address["execution"],
                data_dir=directory,
                idle_s=PACE_S / 2,
                poll_interval_s=PACE_S,
                cancel_interval_s=PACE_S,
                cancel_resend_s=2.0,
                refusal_backoff_s=2 * PACE_S,
                recovery_interval_s=5.0,
                status_interval_s=status_interval_s,
                lost_grace_s=lost_grace_s,
                lease_s=lease_s,
            ),
        )
        stack.on_stop(dispatcher.stop)
        await stack.serve("dispatcher", dispatcher.services, verifier, database)
    except BaseException:
        await stack.stop()
        await catalogue.close()
        raise
    token = keys.issue(VO, "olivia", ["operator", "user"])
    opened = [channel(address[name], token=token) for name in ("definition", "execution")]
    world = InProcessWorld(
        database,
        directory,
        catalogue,
        names,
        definition_pb2_grpc.DefinitionServiceStub(opened[0]),  # type: ignore[no-untyped-call]
        execution_pb2_grpc.ExecutionServiceStub(opened[1]),  # type: ignore[no-untyped-call]
        opened,
        [*cli_options(address), "--token", token],
        stack=stack,
        null=compute,
        null_data=data,
        registry=registry,
        more_null=more,
    )
    try:
        yield world
    finally:
        try:
            await asyncio.wait_for(world.close(), STOP_S)
        except TimeoutError:
            raise AssertionError(f"the components did not stop within {STOP_S} s") from None


def cli_options(addresses: Mapping[str, str]) -> list[str]:
    """`--definition ADDRESS` and the like, for the services `dxts` reads."""
    return [
        option
        for name in ("definition", "execution", "accounting")
        for option in (f"--{name}", addresses[name])
    ]


# What a scenario starts its world with (conftest's `launch` fixtures): `async with
# launch(null=..., ...) as world`, taking the options of `running`.
Launch = Callable[..., AbstractAsyncContextManager[World]]


# -- the invariants -----------------------------------------------------------------------------


async def check_counters(world: World, wg: Submitted) -> None:
    """The exact counters (the counters library's read) equal COUNT(*) over the rows, per
    member, for inputs, parcels and the data parcels' storage deltas."""
    tids = [wg.tid(n) for n in wg.members]
    async with world.database.transaction(RC) as conn:
        reading = await TRANSFORMATION.read(conn, {"TransformationID": tids})
        from_counters = {
            (bytes(tid), str(entity), str(status)): values["Count"]
            for (tid, entity, status), values in reading.items()
        }
        counted: dict[tuple[bytes, str, str], int] = {}
        for entity, table in (("Input", execution.inputs), ("Parcel", execution.parcels)):
            rows = await conn.execute(
                sa.select(table.c.TransformationID, table.c.Status, sa.func.count())
                .where(table.c.TransformationID.in_(tids))
                .group_by(table.c.TransformationID, table.c.Status)
            )
            counted.update({(bytes(t), entity, str(s)): int(n) for t, s, n in rows})
        data_reading = await DATA_PARCELS.read(conn, {"TransformationID": tids})
        data_counters = {
            (bytes(tid), str(status), str(se)): tuple(values[m] for m in DATA_PARCELS.measures)
            for (tid, status, se), values in data_reading.items()
        }
        deltas, parcels = execution.data_parcel_deltas, execution.parcels
        rows = await conn.execute(
            sa.select(
                parcels.c.TransformationID,
                parcels.c.Status,
                deltas.c.StorageElement,
                sa.func.sum(deltas.c.FilesAdded),
                sa.func.sum(deltas.c.BytesAdded),
                sa.func.sum(deltas.c.FilesFreed),
                sa.func.sum(deltas.c.BytesFreed),
            )
            .select_from(parcels.join(deltas, deltas.c.ParcelID == parcels.c.ParcelID))
            .where(parcels.c.TransformationID.in_(tids))
            .group_by(parcels.c.TransformationID, parcels.c.Status, deltas.c.StorageElement)
        )
        data_counted = {
            (bytes(r[0]), str(r[1]), str(r[2])): tuple(int(v) for v in r[3:])
            for r in rows
            if any(r[3:])
        }
    assert from_counters == counted, "counters differ from COUNT(*)"
    assert data_counters == data_counted, "data parcel counters differ from the deltas"


def _chain(rows: Sequence[Any], final: str, machine: Any, who: str) -> None:
    """The StateChange rows of one owner form a chain of allowed edges ending at `final`."""
    changes = [r for r in rows if r.EventType == STATE_CHANGE]
    assert changes, f"{who}: no StateChange row"
    previous = changes[0].OldStatus
    for row in changes:
        assert row.OldStatus == previous, (
            f"{who}: logged {row.OldStatus} → {row.NewStatus} after reaching {previous}"
        )
        assert machine.allowed(row.OldStatus, row.NewStatus), (
            f"{who}: {row.OldStatus} → {row.NewStatus} is no edge of the machine"
        )
        previous = row.NewStatus
    assert previous == final, f"{who}: the log ends at {previous}, the row is {final}"


async def check_logs(world: World, wg: Submitted) -> None:
    status, members = await world.statuses(wg)
    workgraph_log, member_logs = await world.logs(wg)
    _chain(workgraph_log, status, W_MACHINE, "workgraph")
    for name, state in members.items():
        _chain(member_logs.get(name, []), state, T_MACHINE, name)


async def check_invariants(
    world: World, wg: Submitted, *, final: str = W.COMPLETED, bulk_rows: bool = True
) -> None:
    """What every scenario ends with (see the module). `bulk_rows` false: archiving or
    cleaning deleted them, so only the counters (now empty), feeders and logs are checked."""
    assert (await world.statuses(wg))[0] == final
    census = await world.census(wg)
    feeders = await world.feeders_on(wg)
    for name in wg.members:
        if final != W.CANCELLED:  # a cancellation leaves the feeders as they were
            assert not feeders[name], f"{name}'s feeder is still enabled at {final}"
        live_inputs = {s: n for s, n in census[name]["inputs"].items() if s not in TERMINAL_INPUTS}
        assert not live_inputs, f"{name}: inputs not terminal: {live_inputs}"
        live = {s: n for s, n in census[name]["parcels"].items() if s not in TERMINAL_PARCELS}
        assert not live, f"{name}: parcels not terminal: {live}"
        if not bulk_rows:
            assert not census[name]["inputs"] and not census[name]["parcels"], (
                f"{name}: bulk rows remain: {census[name]}"
            )
    if bulk_rows:
        await _check_processed_once(world, wg)
    await check_counters(world, wg)
    await check_logs(world, wg)


async def _check_processed_once(world: World, wg: Submitted) -> None:
    """Every Processed input is in exactly one successful parcel (Done, PartiallyDone, or a
    born-Done recovery parcel) — and that parcel is its LastParcelID."""
    i, pi, p = execution.inputs, execution.parcel_inputs, execution.parcels
    tids = [wg.tid(n) for n in wg.members]
    async with world.database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(i.c.InputID, i.c.LastParcelID, p.c.ParcelID, p.c.Status)
            .select_from(
                i.outerjoin(
                    pi,
                    sa.and_(
                        pi.c.TransformationID == i.c.TransformationID,
                        pi.c.InputID == i.c.InputID,
                    ),
                ).outerjoin(
                    p,
                    sa.and_(
                        p.c.ParcelID == pi.c.ParcelID,
                        p.c.Status.in_([P.DONE.value, P.PARTIALLY_DONE.value]),
                    ),
                )
            )
            .where(i.c.TransformationID.in_(tids), i.c.Status == I.PROCESSED.value)
        )
        succeeded: dict[bytes, list[bytes]] = defaultdict(list)
        last: dict[bytes, bytes | None] = {}
        for row in rows:
            key = bytes(row.InputID)
            last[key] = bytes(row.LastParcelID) if row.LastParcelID else None
            if row.ParcelID is not None:
                succeeded[key].append(bytes(row.ParcelID))
    for input_id, parcel in last.items():
        found = succeeded.get(input_id, [])
        assert len(found) == 1, f"input {id_to_str(input_id)} in {len(found)} successful parcels"
        assert found[0] == parcel, f"input {id_to_str(input_id)}: LastParcelID is another parcel"


async def output_sources(world: World, wg: Submitted, output: str) -> dict[str, str]:
    """LFN produced under `output` → the LFN of the input its parcel processed."""
    out, pi, i = execution.parcel_outputs, execution.parcel_inputs, execution.inputs
    async with world.database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(out.c.LFN, i.c.LFN.label("source"))
            .select_from(
                out.join(pi, pi.c.ParcelID == out.c.ParcelID).join(
                    i,
                    sa.and_(
                        i.c.TransformationID == pi.c.TransformationID,
                        i.c.InputID == pi.c.InputID,
                    ),
                )
            )
            .where(out.c.TransformationOutputID == id_from_str(wg.outputs[output]))
        )
        return {str(r.LFN): str(r.source) for r in rows}


async def done_parameters(world: World, wg: Submitted, name: str) -> list[Any]:
    """The parameters of the step's parcels that ended Done."""
    p, c = execution.parcels, execution.compute_parcels
    async with world.database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(c.c.Parameters)
            .select_from(p.join(c, c.c.ParcelID == p.c.ParcelID))
            .where(p.c.TransformationID == wg.tid(name), p.c.Status == "Done")
        )
        return [r.Parameters for r in rows]
