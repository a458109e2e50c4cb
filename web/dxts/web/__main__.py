"""`dxts-web`: the web view on its own (a deployment's web Deployment), in the shell every server
shares (`dxts.core.component.serve`); configured by DXTS_WEB_* and the services'
DXTS_*_ADDRESS variables (dxts.web.settings). It serves HTTP only: no gRPC service."""

from __future__ import annotations

import logging

from dxts.core.component import Component, Process, serve
from dxts.web.server import WebServer
from dxts.web.settings import WebSettings


async def build(settings: WebSettings, process: Process) -> Component:
    server = WebServer(settings)

    async def announce() -> None:
        logging.getLogger("dxts.web").warning("dxts-web serving %s", server.url)

    return Component(on_start=[server.start, announce], cleanups=[server.stop])


def main() -> None:
    serve("web view", WebSettings, build)


if __name__ == "__main__":
    main()
