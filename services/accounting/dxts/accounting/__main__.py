"""`dxts-accounting`: the accounting service as a process of its own.

Settings come from the environment: DXTS_DB_URL (and the other DXTS_DB_* settings),
DXTS_LISTEN, DXTS_METRICS_PORT, DXTS_SHUTDOWN_GRACE_S, DXTS_AUTH_*, DXTS_DEFINITION_ADDRESS,
DXTS_DATA_DIR (development keys only) and the DXTS_ACCOUNTING_* tunables. SIGTERM or SIGINT
stops it gracefully: health turns NOT_SERVING, in-flight calls get the grace period, then the
sweeps finish their turn (one still running after a few seconds is cancelled: a fold in progress
rolls back, and its rows are folded by the next holder of the fold lock).
"""

from __future__ import annotations

import contextlib
import logging

from dxts.accounting.component import build_accounting
from dxts.accounting.settings import AccountingSettings
from dxts.core.db import open_database
from dxts.core.grpc import TokenVerifier
from dxts.core.grpc.process import run_process, serve_component
from dxts.core.settings import AuthSettings, DatabaseSettings, ServerSettings

log = logging.getLogger("dxts.accounting")


async def serve() -> None:
    """Run the service until a signal asks it to stop."""
    server_settings = ServerSettings()
    database_settings = DatabaseSettings()
    settings = AccountingSettings()
    verifier = TokenVerifier.from_settings(AuthSettings(), dev_key_dir=settings.data_dir)
    async with contextlib.AsyncExitStack() as stack:
        database = await open_database(database_settings.url, database_settings)
        stack.push_async_callback(database.dispose)
        accounting = await build_accounting(database, settings=settings)
        stack.push_async_callback(accounting.stop)
        server = await serve_component(
            stack,
            accounting.services,
            settings=server_settings,
            verifier=verifier,
            database=database,
            log=log,
        )
        await server.serve_until_signalled()


def main() -> None:
    run_process("accounting service", serve, log)


if __name__ == "__main__":
    main()
