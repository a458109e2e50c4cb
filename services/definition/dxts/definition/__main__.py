"""`dxts-definition`: the definition service as a process of its own, in the shell every server
shares (`dxts.core.component.serve`: database, gRPC server, metrics, graceful stop).

Settings: the shell's (DXTS_DB_*, DXTS_LISTEN, DXTS_METRICS_PORT, DXTS_SHUTDOWN_GRACE_S,
DXTS_AUTH_*, DXTS_DATA_DIR), DXTS_EXECUTION_ADDRESS, DXTS_CONFIG_FILE, the DXTS_DEFINITION_*
settings and the lifecycle engine's (DXTS_LIFECYCLE_*, DXTS_ACCOUNTING_ADDRESS,
DXTS_SERVICE_TOKEN or DXTS_SERVICE_TOKEN_FILE, and the file catalogue's DXTS_CATALOGUE_* for the
clean-up actions).
"""

from __future__ import annotations

from dxts.core.component import Process, serve
from dxts.definition.component import Definition, build_definition
from dxts.definition.settings import DefinitionSettings, LifecycleSettings


async def build(settings: DefinitionSettings, process: Process) -> Definition:
    return await build_definition(
        await process.database(),
        settings=settings,
        lifecycle=LifecycleSettings(),
        start_sweeps=False,
    )


def main() -> None:
    serve("definition service", DefinitionSettings, build)


if __name__ == "__main__":
    main()
