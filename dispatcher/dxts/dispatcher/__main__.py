"""`dxts-dispatcher`: the dispatcher as a process of its own (any number of replicas).

Settings come from the environment: DXTS_DB_URL (and the other DXTS_DB_* settings),
DXTS_LISTEN (DispatcherService: the push path and DispatcherStatus), DXTS_METRICS_PORT,
DXTS_SHUTDOWN_GRACE_S, DXTS_AUTH_*, DXTS_BACKENDS, DXTS_CONFIG_FILE (the definition defaults
and, unless DXTS_BACKEND_POLICY is set, the backend policy), DXTS_DEFINITION_ADDRESS,
DXTS_EXECUTION_ADDRESS, DXTS_SERVICE_TOKEN(_FILE) or DXTS_DATA_DIR, and the DXTS_DISPATCH_*
tunables (see `settings`). SIGTERM or SIGINT stops it gracefully: health turns NOT_SERVING,
in-flight calls get the grace period, then the sweeps are cancelled; whatever they left Reserved
is re-submitted by a recovery sweep after the lease.
"""

from __future__ import annotations

import contextlib
import logging

from dxts.core.db import open_database
from dxts.core.grpc import TokenVerifier
from dxts.core.grpc.process import run_process, serve_component
from dxts.core.settings import AuthSettings, DatabaseSettings, ServerSettings
from dxts.dispatcher.component import build_dispatcher
from dxts.dispatcher.settings import DispatcherSettings

log = logging.getLogger("dxts.dispatcher")


async def serve() -> None:
    server_settings = ServerSettings()
    database_settings = DatabaseSettings()
    settings = DispatcherSettings()
    verifier = TokenVerifier.from_settings(AuthSettings(), dev_key_dir=settings.data_dir)
    async with contextlib.AsyncExitStack() as stack:
        database = await open_database(database_settings.url, database_settings)
        stack.push_async_callback(database.dispose)
        component = await build_dispatcher(database, settings=settings)
        stack.push_async_callback(component.stop)
        server = await serve_component(
            stack,
            component.services,
            settings=server_settings,
            verifier=verifier,
            database=database,
            log=log,
        )
        log.info(
            "dispatching to %s",
            ", ".join(f"{b.name} ({b.kind.value}, {b.address})" for b in settings.backends)
            or "no backend",
        )
        await server.serve_until_signalled()


def main() -> None:
    run_process("dispatcher", serve, log)


if __name__ == "__main__":
    main()
