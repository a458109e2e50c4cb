"""The end-to-end world in the deployed shape: every component its own process.

`running_cluster(database, url, directory, ...)` starts a `LocalCluster` (dxts-definition,
dxts-execution, dxts-accounting, dxts-dispatcher and two `dxts-backend-null` adaptors, compute
and data, each from its console script with only the environment the chart gives its pod) over
the test's database, and gives the same `World` as `e2e_world.running`: the fast pacing of the
in-process world goes through each component's environment variables, and the scenarios' own
plugins reach the processes as an experiment's would, as entry points of an installed package
(tests/e2e_plugins). Reads go to the database; changes go through the services, with tokens
signed by the cluster's key.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e_plugins import OutputNames
from e2e_world import PACE_S, STOP_S, VO, World, cli_options

from dxts.backends.null.settings import NullSettings
from dxts.bench.cluster import Backend, LocalCluster, fast_pacing
from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.db import Database
from dxts.core.grpc import channel
from dxts.core.states import Kind
from dxts.v1 import (
    backend_pb2,
    backend_pb2_grpc,
    definition_pb2_grpc,
    execution_pb2_grpc,
)


def null_env(settings: NullSettings, **changes: Any) -> dict[str, str]:
    """`settings` (with `changes`) as the adaptor's DXTS_NULL_* variables; its name and kind
    are the cluster's `Backend`'s."""
    dumped = settings.model_copy(update=changes).model_dump(
        mode="json", exclude={"name", "kind", "report_mode", "dispatcher_address"}
    )
    return {
        f"DXTS_NULL_{key.upper()}": value if isinstance(value, str) else json.dumps(value)
        for key, value in dumped.items()
        if value is not None
    }


@dataclass(kw_only=True)
class ClusterWorld(World):
    """A `World` whose components are `cluster`'s processes."""

    cluster: LocalCluster
    null_settings: dict[str, NullSettings]

    def _adaptor(self, backend: str) -> Any:
        opened = channel(self.cluster.addresses[f"backend-{backend}"], token=self._token())
        self._channels.append(opened)
        return backend_pb2_grpc.BackendAdaptorServiceStub(opened)  # type: ignore[no-untyped-call]

    def _token(self) -> str:
        """The dispatcher's identity: the only caller an adaptor answers."""
        return self.cluster.token("dxts", "dxts-dispatcher", ["dispatcher"])

    async def backend_counters(self, backend: str = "null") -> dict[str, int]:
        reply = await self._adaptor(backend).Describe(backend_pb2.DescribeRequest())
        return dict(reply.counters)

    async def configure_null(self, backend: str = "null", **changes: Any) -> None:
        assert not (await self.backend_counters(backend))["in_flight"], "parcels in flight"
        settings = self.null_settings[backend] = self.null_settings[backend].model_copy(
            update=changes
        )
        name = f"backend-{backend}"
        await asyncio.to_thread(self.cluster.kill, name)
        await asyncio.to_thread(self.cluster.restart, name, null_env(settings))

    async def close(self) -> None:
        await super().close()
        await asyncio.to_thread(self.cluster.stop)


@contextlib.asynccontextmanager
async def running_cluster(
    database: Database,
    url: str,
    directory: Path,
    *,
    null: NullSettings | None = None,
    null_data: NullSettings | None = None,
    more_null: Sequence[NullSettings] = (),
    archive_delay_s: float = 3600.0,
    status_interval_s: float = 2 * PACE_S,
    execution_replicas: int = 1,
    dispatcher_replicas: int = 1,
) -> AsyncIterator[World]:
    """Every component as its own process over `database` (at `url`, schema created), with
    `null` and `null_data` (and `more_null` after them) as the adaptors' settings and the
    replicas asked for (each service serving its metrics); stopped after."""
    adaptors: Mapping[str, NullSettings] = {
        "null": null or NullSettings(name="null", outputs=["out"]),
        "null-data": null_data or NullSettings(name="null-data", kind=Kind.DATA),
        **{settings.name: settings for settings in more_null},
    }
    backends = [
        Backend(name, kind=settings.kind.value.lower(), env=null_env(settings), adaptor="null")
        for name, settings in adaptors.items()
    ]
    cluster = LocalCluster(
        directory / "cluster",
        db_url=url,
        backends=backends,
        env=fast_pacing(
            PACE_S, archive_delay_s=archive_delay_s, status_interval_s=status_interval_s
        ),
        migrate=False,
        execution_replicas=execution_replicas,
        dispatcher_replicas=dispatcher_replicas,
        metrics=True,
    )
    await asyncio.to_thread(cluster.__enter__)
    try:
        catalogue = await open_catalogue(
            CatalogueSettings(url=cluster.components["definition"].env["DXTS_CATALOGUE_URL"])
        )
    except BaseException:
        await asyncio.to_thread(cluster.stop)
        raise
    token = cluster.token(VO, "olivia", ["operator", "user"])
    opened = [channel(cluster.addresses[name], token=token) for name in ("definition", "execution")]
    world = ClusterWorld(
        database,
        directory,
        catalogue,
        OutputNames(),
        definition_pb2_grpc.DefinitionServiceStub(opened[0]),  # type: ignore[no-untyped-call]
        execution_pb2_grpc.ExecutionServiceStub(opened[1]),  # type: ignore[no-untyped-call]
        opened,
        [*cli_options(cluster.addresses), "--token", token],
        cluster=cluster,
        null_settings=dict(adaptors),
    )
    try:
        yield world
    finally:
        try:
            await asyncio.wait_for(world.close(), STOP_S)
        except TimeoutError:
            raise AssertionError(f"the components did not stop within {STOP_S} s") from None
