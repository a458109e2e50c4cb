"""`dxts-accounting`: the accounting service as a process of its own, in the shell every server
shares (`dxts.core.component.serve`: database, gRPC server, metrics, graceful stop).

Settings: the shell's (DXTS_DB_*, DXTS_LISTEN, DXTS_METRICS_PORT, DXTS_SHUTDOWN_GRACE_S,
DXTS_AUTH_*, DXTS_DATA_DIR), DXTS_DEFINITION_ADDRESS and the DXTS_ACCOUNTING_* tunables. At a
stop, a fold still running after a few seconds is cancelled and rolls back; its rows are folded
by the next holder of the fold lock.
"""

from __future__ import annotations

from dxts.accounting.component import Accounting, build_accounting
from dxts.accounting.settings import AccountingSettings
from dxts.core.component import Process, serve


async def build(settings: AccountingSettings, process: Process) -> Accounting:
    return await build_accounting(await process.database(), settings=settings, start_sweeps=False)


def main() -> None:
    serve("accounting service", AccountingSettings, build)


if __name__ == "__main__":
    main()
