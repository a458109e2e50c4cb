"""`dxts-execution`: the execution service as a process of its own, in the shell every server
shares (`dxts.core.component.serve`: database, file catalogue, gRPC server, metrics, graceful
stop).

Settings: the shell's (DXTS_DB_*, DXTS_LISTEN, DXTS_METRICS_PORT, DXTS_SHUTDOWN_GRACE_S,
DXTS_AUTH_*, DXTS_DATA_DIR), DXTS_DEFINITION_ADDRESS, DXTS_SERVICE_TOKEN /
DXTS_SERVICE_TOKEN_FILE (else DXTS_DATA_DIR's development key pair), the file catalogue's
DXTS_CATALOGUE_* and the DXTS_EXECUTION_* tunables. Every installed plugin is loaded and checked
at start-up: one that cannot be called stops the process with the list of what is wrong. At a
stop, a batch still being written after a few seconds is cancelled and rolls back; its inputs
wait for the next round.
"""

from __future__ import annotations

from dxts.core.component import Process, serve
from dxts.execution.component import Execution, build_execution
from dxts.execution.settings import ExecutionSettings


async def build(settings: ExecutionSettings, process: Process) -> Execution:
    return await build_execution(
        await process.database(),
        settings=settings,
        catalogue=await process.catalogue(),
        start_sweeps=False,
    )


def main() -> None:
    serve("execution service", ExecutionSettings, build)


if __name__ == "__main__":
    main()
