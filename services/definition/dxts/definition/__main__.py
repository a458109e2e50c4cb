"""`dxts-definition`: the definition service as a process of its own.

Settings come from the environment: DXTS_DB_URL (and the other DXTS_DB_* settings),
DXTS_LISTEN, DXTS_METRICS_PORT, DXTS_SHUTDOWN_GRACE_S, DXTS_AUTH_*, DXTS_EXECUTION_ADDRESS,
DXTS_CONFIG_FILE, DXTS_DATA_DIR (development keys only), the DXTS_DEFINITION_* settings and
the lifecycle engine's (DXTS_LIFECYCLE_*, DXTS_ACCOUNTING_ADDRESS, DXTS_SERVICE_TOKEN or
DXTS_SERVICE_TOKEN_FILE, and the file catalogue's DXTS_CATALOGUE_* for the clean-up actions).
SIGTERM or SIGINT stops it gracefully: health turns NOT_SERVING and in-flight calls get the
grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys

from dxts.core.db import open_database
from dxts.core.errors import DxtsError
from dxts.core.grpc import GrpcServer, TokenVerifier, start_metrics_server
from dxts.core.settings import AuthSettings, DatabaseSettings, ServerSettings
from dxts.definition.component import Definition, build_definition
from dxts.definition.lifecycle.settings import LifecycleSettings
from dxts.definition.settings import DefinitionSettings

__all__ = ["Definition", "build_definition", "main"]

log = logging.getLogger("dxts.definition")


async def serve() -> None:
    """Run the service until a signal asks it to stop."""
    server_settings = ServerSettings()
    database_settings = DatabaseSettings()
    settings = DefinitionSettings()
    verifier = TokenVerifier.from_settings(AuthSettings(), dev_key_dir=settings.data_dir)
    async with contextlib.AsyncExitStack() as stack:
        database = await open_database(database_settings.url, database_settings)
        stack.push_async_callback(database.dispose)
        definition = await build_definition(
            database, settings=settings, lifecycle=LifecycleSettings()
        )
        stack.push_async_callback(definition.stop)
        metrics = start_metrics_server(server_settings.metrics_port)
        if metrics is not None:
            stack.callback(metrics.close)
            log.info("metrics on port %d", metrics.port)
        server = GrpcServer(
            definition.services, settings=server_settings, verifier=verifier, database=database
        )
        await server.start()
        stack.push_async_callback(server.stop)
        await server.serve_until_signalled()


def main() -> None:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serve())
    except DxtsError as error:
        log.error("cannot run the definition service: %s", error)
        sys.exit(1)


if __name__ == "__main__":
    main()
