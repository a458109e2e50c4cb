"""The reference productions under examples/reference/ run to Completed (SQLite and MariaDB).

Each document is validated against the installed plugins (none is unknown: the six plugins are
built-ins) and submitted as it is to the in-process world, whose null adaptor stands in for
running the stand-in tools (each tool is checked under plain cwltool by
tests/cwl/test_reference_tools.py): the partner comparison (RecoB's jobs slower than RecoA's,
so that every set waits for its partner), the stripping fed from a catalogue
whose lineage names each RDST file's raw ancestors, and the simulation scouted in three stages,
signed off, and its histograms merged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_world import Submitted, W, World, check_invariants, running
from typer.testing import CliRunner

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.cli.main import app
from dxts.core.catalogue import CatalogueFile
from dxts.core.db import Database
from dxts.core.states import ActionResult
from dxts.v1 import common_pb2

REFERENCE = Path(__file__).resolve().parents[2] / "examples" / "reference"
DOCUMENTS = ("partner-comparison", "stripping-with-ancestors", "simulation-staged")
# Every output id of the stand-in tools: the null adaptor reports a file for each.
OUTPUTS = ["sim-files", "histograms", "reco-files", "comparison", "stripped"]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_a_reference_document_validates_with_the_installed_plugins(name: str) -> None:
    result = CliRunner().invoke(app, ["validate", str(REFERENCE / f"{name}.cwl")])
    assert result.exit_code == 0, result.output
    assert "unknown-plugin" not in result.output and ": valid," in result.output


async def _submit(world: World, name: str) -> Submitted:
    """The document with the stand-in tools beside it, as `dxts submit` sends a directory."""
    files = {f"{name}.cwl": (REFERENCE / f"{name}.cwl").read_bytes()}
    for tool in sorted((REFERENCE / "tools").glob("*.cwl")):
        files[f"tools/{tool.name}"] = tool.read_bytes()
    return await world.submit_bundle(
        common_pb2.DocumentBundle(main_path=f"{name}.cwl", files=files)
    )


async def _lineage(world: World) -> None:
    raw = [CatalogueFile(lfn=f"/lhcb/reference/raw/{n}.raw", size=5) for n in range(4)]
    rdst = [
        CatalogueFile(
            lfn=f"/lhcb/reference/rdst/{n}.rdst",
            size=3,
            metadata={"file_type": "RDST", "run": 7, "ancestors": [raw[n].lfn]},
        )
        for n in range(4)
    ]
    await world.catalogue.register([*raw, *rdst])


async def test_the_reference_documents_run_to_completed(database: Database, tmp_path: Path) -> None:
    null = NullSettings(name="null", outputs=OUTPUTS)
    async with running(database, tmp_path, null=null) as world:
        await _lineage(world)
        comparison = await _submit(world, "partner-comparison")
        # RecoB's jobs end after RecoA's, so the Comparison meets each set before its partner
        # is made and withholds it (what a loaded machine did once, now every run): the sets
        # must still be compared well within the wait, not after ByPartner's default delay.
        recob = comparison.members["RecoB"]
        world.null.settings.rules.append(
            NullRule(fate="success", output_prefix=f"/{recob}/", delay_s=3)
        )
        stripping = await _submit(world, "stripping-with-ancestors")
        simulation = await _submit(world, "simulation-staged")
        for wg in (comparison, stripping, simulation):
            await world.start(wg)
        await world.reach(simulation, W.APPROVING_BLOCKED)  # the sign-off
        sign_off = (await world.actions(simulation))["workgraph/Approving/2"]
        await world.force(sign_off.ActionID, ActionResult.PASSED, "signed off")
        for wg in (comparison, stripping, simulation):
            await world.reach(wg, W.COMPLETED)
            await check_invariants(world, wg)
        joined = (await world.actions(comparison))["Comparison/Finalizing/1"]
        assert joined.Result == ActionResult.PASSED, joined.Message
        stripped = {
            r.LFN: r.Descriptor["ancestors"] for r in await world.inputs(stripping, "Stripping")
        }
        assert stripped == {
            f"/lhcb/reference/rdst/{n}.rdst": [f"/lhcb/reference/raw/{n}.raw"] for n in range(4)
        }
        actions = await world.actions(simulation)
        for member in ("Simulation", "Reconstruction"):
            merged = actions[f"{member}/Finalizing/2"]
            assert merged.Result == ActionResult.PASSED, merged.Message
            assert merged.Message.startswith("merged "), merged.Message
