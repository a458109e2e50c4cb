"""The accounting component assembled: its gRPC service and its sweeps, ready to be served.

`dxts-accounting` (`__main__`) serves it alone; `dxts up` composes it with the other
components in one process and one event loop:

    accounting = await build_accounting(database, settings=AccountingSettings())
    server = GrpcServer([*accounting.services, ...], settings=..., verifier=...)
    ...
    await accounting.stop()

It is a `dxts.core.component.Component`: `start` runs its sweeps, `stop` ends them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from dxts.accounting.edge.definition_client import DefinitionMemberLister
from dxts.accounting.edge.servicer import AccountingServicer
from dxts.accounting.logic.members import MemberLister, NoMemberLister
from dxts.accounting.logic.repair import DriftWatch
from dxts.accounting.logic.sweeps import Sweeps
from dxts.accounting.settings import AccountingSettings
from dxts.accounting.store.counts import prepare
from dxts.core.component import Component
from dxts.core.counters import on_drift
from dxts.core.db import Database
from dxts.core.grpc import Service, channel
from dxts.core.kernel.sweeps import SweepRunner
from dxts.core.locks import LockManager
from dxts.v1 import accounting_pb2, accounting_pb2_grpc

# A fold or rebuild in progress is short; longer than this it is cancelled (and rolled back).
STOP_GRACE_S = 5.0


@dataclass(kw_only=True)
class Accounting(Component):
    """A built accounting component: its service, and the sweeps its runner runs."""

    sweeps: Sweeps

    async def stop(self) -> None:
        """Let the rounds in progress end at their next pause (within `stop_grace_s`), then
        stop as every component does."""
        self.sweeps.stop()
        await super().stop()


async def build_accounting(
    database: Database,
    *,
    settings: AccountingSettings | None = None,
    members: MemberLister | None = None,
    locks: LockManager | None = None,
    start_sweeps: bool = True,
) -> Accounting:
    """The accounting service over a started `database`.

    `members` defaults to the definition service at `settings.definition_address` (or to a
    lister that answers UNAVAILABLE when none is configured); `locks` to a LockManager of its
    own. With `start_sweeps` false the sweeps are built but not run (tests drive them).
    """
    settings = settings or AccountingSettings()
    await prepare(database)
    cleanups: list[Callable[[], object]] = []
    if members is None:
        if settings.definition_address:
            definition: grpc.aio.Channel = channel(settings.definition_address)
            cleanups.append(definition.close)
            members = DefinitionMemberLister(definition, settings.definition_address)
        else:
            members = NoMemberLister()
    if locks is None:
        locks = LockManager(database)
        cleanups.append(locks.dispose)
    watch = DriftWatch()
    cleanups.append(on_drift(watch.on_drift))
    sweeps = Sweeps(database, locks, settings, watch)
    runner = SweepRunner(sweeps.sweeps())
    watch.on_wake = functools.partial(runner.wake, "accounting-drift")
    service = Service.of(
        accounting_pb2.DESCRIPTOR.services_by_name["AccountingService"],
        accounting_pb2_grpc.add_AccountingServiceServicer_to_server,
        AccountingServicer(database, members),
    )
    accounting = Accounting(
        services=[service],
        sweeps=sweeps,
        runner=runner,
        stop_grace_s=STOP_GRACE_S,
        cleanups=cleanups,
    )
    if start_sweeps:
        await accounting.start()
    return accounting
