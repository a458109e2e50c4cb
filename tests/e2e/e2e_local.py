"""The end-to-end world over the real local adaptor: parcels run as real CWL with cwltool, in
the sandbox the local adaptor gives every job, instead of on the null adaptor.

`running_local(shape, database, url, directory)` gives the same `World` as `e2e_world.running`
in either shape: `up` is what `dxts up` composes (`dxts.cli.up.compose`, its sweeps running,
the local adaptor for compute and data parcels), `processes` every component its own process
from its console script (`LocalCluster`), with two `dxts-backend-local` adaptors, compute and
data, each with only its own `DXTS_LOCAL_*` settings. Reads go to the database; changes go
through the services.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e_plugins import OutputNames
from e2e_world import PACE_S, STOP_S, VO, World, cli_options

from dxts.bench.cluster import Backend, LocalCluster, fast_pacing
from dxts.cli.up import STORAGE_ELEMENTS, Stack, compose
from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.db import Database
from dxts.core.grpc import DevKeys, channel
from dxts.v1 import definition_pb2_grpc, execution_pb2_grpc

SHAPES = ("up", "processes")
# What the compute adaptor of the `processes` shape says its failures' site is.
CLUSTER_SITE = "e2e-cluster-node"


@dataclass(kw_only=True)
class LocalWorld(World):
    """A `World` whose compute parcels run on the local adaptor; `site` is what that adaptor
    names as where they ran."""

    site: str
    stack: Stack | None = None
    cluster: LocalCluster | None = None

    async def close(self) -> None:
        for opened in self._channels:
            await opened.close()
        self._channels.clear()
        if self.stack is not None:
            await self.stack.stop()
        if self.cluster is not None:
            await asyncio.to_thread(self.cluster.stop)
        await super().close()


def _local_env(directory: Path, name: str, **more: str) -> dict[str, str]:
    """A `dxts-backend-local`'s own settings: its work directory, the shared storage."""
    return {
        "DXTS_LOCAL_WORK_DIR": str(directory / name),
        "DXTS_LOCAL_STORAGE_ROOT": str(directory / "storage"),
        "DXTS_LOCAL_STORAGE_ELEMENTS": json.dumps(list(STORAGE_ELEMENTS)),
        "DXTS_LOCAL_WORKERS": "2",
        **more,
    }


def _world(
    database: Database, directory: Path, catalogue: Any, addresses: dict[str, str], token: str
) -> dict[str, Any]:
    opened = [channel(addresses[name], token=token) for name in ("definition", "execution")]
    return {
        "database": database,
        "data_dir": directory,
        "catalogue": catalogue,
        "names": OutputNames(),
        "definition": definition_pb2_grpc.DefinitionServiceStub(opened[0]),  # type: ignore[no-untyped-call]
        "execution": execution_pb2_grpc.ExecutionServiceStub(opened[1]),  # type: ignore[no-untyped-call]
        "_channels": opened,
        "cli": [*cli_options(addresses), "--token", token],
    }


@contextlib.asynccontextmanager
async def _up(database: Database, directory: Path) -> AsyncIterator[LocalWorld]:
    keys = DevKeys.load_or_create(directory)
    catalogue = await open_catalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{directory / 'catalogue.sqlite'}")
    )
    try:
        stack = await compose(
            database, data_dir=directory, verifier=keys.verifier(), catalogue=catalogue
        )
    except BaseException:
        await catalogue.close()
        raise
    addresses = {name: stack.address(name) for name in ("definition", "execution", "accounting")}
    token = keys.issue(VO, "olivia", ["operator", "user"])
    world = _world(database, directory, catalogue, addresses, token)
    yield LocalWorld(**world, site=_local_site(), stack=stack)


def _local_site() -> str:
    """The site the local adaptor `dxts up` composes names: its settings' default."""
    from dxts.backends.local.settings import LocalSettings

    return LocalSettings(work_dir=Path("/nonexistent")).site


@contextlib.asynccontextmanager
async def _processes(database: Database, url: str, directory: Path) -> AsyncIterator[LocalWorld]:
    home = directory / "cluster"
    backends = [
        Backend(
            "local", env=_local_env(home, "local", DXTS_LOCAL_SITE=CLUSTER_SITE), adaptor="local"
        ),
        Backend("local-data", kind="data", env=_local_env(home, "local-data"), adaptor="local"),
    ]
    cluster = LocalCluster(
        home, db_url=url, backends=backends, env=fast_pacing(PACE_S), migrate=False
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
    addresses = cluster.addresses
    yield LocalWorld(
        **_world(database, directory, catalogue, addresses, token),
        site=CLUSTER_SITE,
        cluster=cluster,
    )


@contextlib.asynccontextmanager
async def running_local(
    shape: str, database: Database, url: str, directory: Path
) -> AsyncIterator[LocalWorld]:
    """The world in `shape` (one of SHAPES) over `database` (at `url`, schema created),
    stopped after."""
    opened = _up(database, directory) if shape == "up" else _processes(database, url, directory)
    async with opened as world:
        try:
            yield world
        finally:
            try:
                await asyncio.wait_for(world.close(), STOP_S)
            except TimeoutError:
                raise AssertionError(f"the components did not stop within {STOP_S} s") from None
