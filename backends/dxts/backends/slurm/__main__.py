"""`dxts-backend-slurm`: the Slurm adaptor as a process (settings: `DXTS_SLURM_*`, the file
catalogue's `DXTS_CATALOGUE_*`, and Slurm's own SLURM_CONF for the cluster it submits to)."""

from __future__ import annotations

from dxts.backends.component import adaptor_component
from dxts.backends.slurm.edge.commands import Slurm
from dxts.backends.slurm.logic.adaptor import SlurmAdaptor
from dxts.backends.slurm.settings import SlurmSettings
from dxts.core.catalogue import load_catalogue
from dxts.core.component import Component, Process, serve


async def build(settings: SlurmSettings, process: Process) -> Component:
    # The adaptor starts the catalogue itself, once it has found the cluster.
    return adaptor_component(
        SlurmAdaptor(settings, load_catalogue(), slurm=Slurm(settings), owns_catalogue=True)
    )


def main() -> None:
    serve("slurm adaptor", SlurmSettings, build)


if __name__ == "__main__":
    main()
