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

import contextlib
import logging

from dxts.core.db import open_database
from dxts.core.grpc import TokenVerifier
from dxts.core.grpc.process import run_process, serve_component
from dxts.core.settings import AuthSettings, DatabaseSettings, ServerSettings
from dxts.definition.component import Definition, build_definition
from dxts.definition.settings import DefinitionSettings, LifecycleSettings

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
        server = await serve_component(
            stack,
            definition.services,
            settings=server_settings,
            verifier=verifier,
            database=database,
            log=log,
        )
        await server.serve_until_signalled()


def main() -> None:
    run_process("definition service", serve, log)


if __name__ == "__main__":
    main()
