"""`dxts-backend-local`: the local adaptor as a process (settings: `DXTS_LOCAL_*`, and the file
catalogue's `DXTS_CATALOGUE_*`, opened and closed by the shell)."""

from __future__ import annotations

from dxts.backends.component import adaptor_component
from dxts.backends.local.logic.adaptor import LocalAdaptor
from dxts.backends.local.settings import LocalSettings
from dxts.core.component import Component, Process, serve


async def build(settings: LocalSettings, process: Process) -> Component:
    catalogue = await process.catalogue() if settings.catalogue else None
    return adaptor_component(LocalAdaptor(settings, catalogue))


def main() -> None:
    serve("local adaptor", LocalSettings, build)


if __name__ == "__main__":
    main()
