"""`dxts-web`: the web view on its own (a deployment's web Deployment), configured by
DXTS_WEB_* and the services' DXTS_*_ADDRESS variables (dxts.web.settings)."""

from __future__ import annotations

import asyncio
import logging
import signal

from dxts.web.server import WebServer
from dxts.web.settings import WebSettings


async def serve(settings: WebSettings) -> None:
    server = WebServer(settings)
    await server.start()
    logging.getLogger("dxts.web").warning("dxts-web serving %s", server.url)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stopped.set)
    await stopped.wait()
    await server.stop()


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    asyncio.run(serve(WebSettings()))


if __name__ == "__main__":
    main()
