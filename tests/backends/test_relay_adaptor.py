"""The open slot: a backend adaptor shipped as a package of its own (tests/relay_adaptor, which
scripts/dev-install installs) is found by entry point and runs a production to Completed, on
both databases, with no file outside its package naming it: `dxts up`'s composition creates it
as `--backend relay` does, and the dispatcher records its identifiers under its adaptor type."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from typer.testing import CliRunner, Result

from dxts.backends import plugins
from dxts.cli.connection import CONNECTION_FILE, Connection
from dxts.cli.main import app
from dxts.cli.up import STORAGE_ELEMENTS, compose
from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.db import Database, Isolation
from dxts.core.grpc import DevKeys
from dxts.core.schema import execution

EXAMPLES = Path(__file__).parents[2] / "examples"
RUN_TIMEOUT_S = 240


def two_seed_example(directory: Path) -> Path:
    """mc-demo with two seeds: two simulations, one reconstruction, one merged dataset, one
    replication (a data parcel, which goes to the local data adaptor)."""
    document = yaml.safe_load((EXAMPLES / "mc-demo.cwl").read_text())
    feeder = document["inputs"]["events"]["dirac:Feeder"]["args"]
    feeder.update(target_events=4000, events_per_seed=2000, batch=2, max_in_flight=4000)
    workgraph = document["hints"]["dirac:Workgraph"]
    workgraph["target"]["files"] = 1
    workgraph["hooks"]["Active"]["args"]["target_events"] = 4000
    (directory / "tools").mkdir()
    for tool in (EXAMPLES / "tools").iterdir():
        (directory / "tools" / tool.name).write_text(tool.read_text())
    path = directory / "two-seeds.cwl"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.fixture(scope="module")
async def installation(
    database: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Path]:
    """Every component over `database`, compute parcels on the relay adaptor; the data
    directory, its connection file written as `dxts up` writes it."""
    data_dir = tmp_path_factory.mktemp("dxts-relay")
    keys = DevKeys.load_or_create(data_dir)
    url = f"sqlite+aiosqlite:///{data_dir / 'catalogue.sqlite'}"
    catalogue = await open_catalogue(CatalogueSettings(url=url))
    stack = await compose(
        database,
        data_dir=data_dir,
        verifier=keys.verifier(),
        catalogue=catalogue,
        backend="relay",
        catalogue_url=url,
    )
    try:
        Connection(
            definition=stack.address("definition"),
            execution=stack.address("execution"),
            accounting=stack.address("accounting"),
            token=keys.issue("demo", "olivia", ["operator", "user"]),
            storage=str(data_dir / "storage"),
            storage_elements=",".join(STORAGE_ELEMENTS),
            catalogue=url,
        ).write(data_dir / CONNECTION_FILE)
        yield data_dir
    finally:
        await stack.stop()
        await catalogue.close()


async def dxts(data_dir: Path, *args: str) -> Result:
    """The `dxts` command against the installation, off the loop its components run on."""
    return await asyncio.to_thread(CliRunner().invoke, app, ["--data-dir", str(data_dir), *args])


def test_the_relay_adaptor_is_found_by_entry_point() -> None:
    assert "relay" in plugins.adaptor_types()


async def test_a_production_runs_to_completed_on_the_relay_adaptor(
    installation: Path, database: Database, tmp_path: Path
) -> None:
    submitted = await dxts(installation, "submit", str(two_seed_example(tmp_path)))
    assert submitted.exit_code == 0, submitted.output
    workgraph = submitted.stdout.strip()
    started = await dxts(installation, "start", workgraph)
    assert started.exit_code == 0, started.output
    watched = await dxts(
        installation, "watch", workgraph, "--interval", "0.5", "--timeout", str(RUN_TIMEOUT_S)
    )
    assert watched.exit_code == 0, watched.output
    shown = await dxts(installation, "show", workgraph, "--output", "json")
    assert shown.exit_code == 0, shown.output
    assert yaml.safe_load(shown.stdout)["status"] in ("Completed", "Archiving", "Archived")

    async def placed(conn: Any) -> tuple[set[str], int, int]:
        parcels, ids = execution.parcels, execution.backend_ids
        compute = await conn.scalar(
            sa.select(sa.func.count()).select_from(parcels).where(parcels.c.Kind == "Compute")
        )
        relayed = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(ids.join(parcels, parcels.c.ParcelID == ids.c.ParcelID))
            .where(ids.c.Adaptor == "relay", parcels.c.Backend == "relay")
        )
        backends = {row[0] for row in await conn.execute(sa.select(parcels.c.Backend).distinct())}
        return backends, compute, relayed

    backends, compute, relayed = await database.run(placed, isolation=Isolation.READ_COMMITTED)
    assert backends == {"relay", "local-data"}  # every compute parcel ran on the relay adaptor
    assert relayed == compute >= 3
