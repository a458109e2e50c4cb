"""`dxts-backend-slurm`: the Slurm adaptor as a process (settings: `DXTS_SLURM_*`, the file
catalogue's `DXTS_CATALOGUE_*`, and Slurm's own SLURM_CONF for the cluster it submits to)."""

from __future__ import annotations

from dxts.backends.server import run_adaptor
from dxts.backends.slurm.adaptor import SlurmAdaptor
from dxts.backends.slurm.settings import SlurmSettings
from dxts.core.catalogue import FileCatalogue, load_catalogue


class _ServedSlurmAdaptor(SlurmAdaptor):
    """The adaptor with the installation's catalogue, opened and closed with it."""

    def __init__(self) -> None:
        catalogue: FileCatalogue = load_catalogue()
        super().__init__(SlurmSettings(), catalogue)
        self._catalogue = catalogue

    async def start(self) -> None:
        await self._catalogue.start()
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        await self._catalogue.close()


def main() -> None:
    run_adaptor("slurm", _ServedSlurmAdaptor)


if __name__ == "__main__":
    main()
