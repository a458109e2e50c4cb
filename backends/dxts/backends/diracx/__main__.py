"""`dxts-backend-diracx`: the DiracX adaptor as a process (settings: `DXTS_DIRACX_*`, see
`settings`; its DiracX credentials are its own, e.g. from a Kubernetes Secret)."""

from __future__ import annotations

from dxts.backends.component import adaptor_component
from dxts.backends.diracx.edge.client import DiracXClient
from dxts.backends.diracx.logic.adaptor import DiracXAdaptor
from dxts.backends.diracx.settings import DiracXSettings
from dxts.core.component import Component, Process, serve


async def build(settings: DiracXSettings, process: Process) -> Component:
    return adaptor_component(DiracXAdaptor(settings, DiracXClient.for_settings(settings)))


def main() -> None:
    serve("diracx adaptor", DiracXSettings, build)


if __name__ == "__main__":
    main()
