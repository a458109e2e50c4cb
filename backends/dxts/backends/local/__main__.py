"""`dxts-backend-local`: the local adaptor as a process (settings: `DXTS_LOCAL_*`, and the file
catalogue's `DXTS_CATALOGUE_*`)."""

from __future__ import annotations

from dxts.backends.component import run_adaptor
from dxts.backends.local.adaptor import LocalAdaptor
from dxts.backends.local.settings import LocalSettings
from dxts.core.catalogue import FileCatalogue, load_catalogue


class _ServedLocalAdaptor(LocalAdaptor):
    """The adaptor with the installation's catalogue, opened and closed with it."""

    def __init__(self) -> None:
        catalogue: FileCatalogue = load_catalogue()
        super().__init__(LocalSettings(), catalogue)
        self._catalogue = catalogue

    async def start(self) -> None:
        await self._catalogue.start()
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        await self._catalogue.close()


def main() -> None:
    run_adaptor("local", _ServedLocalAdaptor)


if __name__ == "__main__":
    main()
