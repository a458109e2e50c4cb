"""`dxts-dispatcher`: the dispatcher as a process of its own (any number of replicas), in the
shell every server shares (`dxts.core.component.serve`: database, gRPC server, metrics,
graceful stop).

Settings: the shell's (DXTS_DB_*, DXTS_LISTEN — DispatcherService: the push path and
DispatcherStatus —, DXTS_METRICS_PORT, DXTS_SHUTDOWN_GRACE_S, DXTS_AUTH_*, DXTS_DATA_DIR),
DXTS_BACKENDS, DXTS_CONFIG_FILE (the definition defaults and, unless DXTS_BACKEND_POLICY is set,
the backend policy), DXTS_DEFINITION_ADDRESS, DXTS_EXECUTION_ADDRESS, DXTS_SERVICE_TOKEN(_FILE)
and the DXTS_DISPATCH_* tunables (see `settings`). What a stop leaves Reserved is re-submitted
by a recovery sweep after the lease.
"""

from __future__ import annotations

import logging

from dxts.core.component import Process, serve
from dxts.dispatcher.component import DispatcherComponent, build_dispatcher
from dxts.dispatcher.settings import DispatcherSettings


async def build(settings: DispatcherSettings, process: Process) -> DispatcherComponent:
    logging.getLogger("dxts.dispatcher").info(
        "dispatching to %s",
        ", ".join(f"{b.name} ({b.kind.value}, {b.address})" for b in settings.backends)
        or "no backend",
    )
    return await build_dispatcher(await process.database(), settings=settings, start_sweeps=False)


def main() -> None:
    serve("dispatcher", DispatcherSettings, build)


if __name__ == "__main__":
    main()
