"""`dxts-execution`: the execution service as a process of its own.

Settings come from the environment: DXTS_DB_URL (and the other DXTS_DB_* settings),
DXTS_LISTEN, DXTS_METRICS_PORT, DXTS_SHUTDOWN_GRACE_S, DXTS_AUTH_*, DXTS_DEFINITION_ADDRESS,
DXTS_SERVICE_TOKEN / DXTS_SERVICE_TOKEN_FILE (else DXTS_DATA_DIR's development key pair), the
file catalogue's DXTS_CATALOGUE_* and the DXTS_EXECUTION_* tunables. Every installed plugin is
loaded and checked at start-up: one that cannot be called stops the process with the list of
what is wrong. SIGTERM or SIGINT stops it gracefully: health turns NOT_SERVING, in-flight calls
get the grace period, then the sweeps finish their round (a batch still being written after a
few seconds is cancelled and rolls back; its inputs wait for the next round).
"""

from __future__ import annotations

import contextlib
import logging

from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.db import open_database
from dxts.core.grpc import TokenVerifier
from dxts.core.grpc.process import run_process, serve_component
from dxts.core.settings import AuthSettings, DatabaseSettings, ServerSettings
from dxts.execution.component import build_execution
from dxts.execution.settings import ExecutionSettings

log = logging.getLogger("dxts.execution")


async def serve() -> None:
    """Run the service until a signal asks it to stop."""
    server_settings = ServerSettings()
    database_settings = DatabaseSettings()
    settings = ExecutionSettings()
    verifier = TokenVerifier.from_settings(AuthSettings(), dev_key_dir=settings.data_dir)
    async with contextlib.AsyncExitStack() as stack:
        database = await open_database(database_settings.url, database_settings)
        stack.push_async_callback(database.dispose)
        catalogue = await open_catalogue(CatalogueSettings())
        stack.push_async_callback(catalogue.close)
        execution = await build_execution(database, settings=settings, catalogue=catalogue)
        stack.push_async_callback(execution.stop)
        server = await serve_component(
            stack,
            execution.services,
            settings=server_settings,
            verifier=verifier,
            database=database,
            log=log,
        )
        await server.serve_until_signalled()


def main() -> None:
    run_process("execution service", serve, log)


if __name__ == "__main__":
    main()
