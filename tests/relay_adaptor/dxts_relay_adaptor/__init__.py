"""The relay adaptor: a backend adaptor written outside dxts, against its adaptor kit only.

It relays every call to a private local adaptor of its own (its own work directory and state),
and counts what it relayed, so that a production run on it shows the open slot end to end: found
by entry point (`dxts.backends`: `relay`), identifiers recorded under its own adaptor type,
outcomes forwarded as the one Outcome model, with no file outside this package changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.backends.component import adaptor_component
from dxts.backends.local.logic.adaptor import LocalAdaptor
from dxts.backends.local.settings import LocalSettings
from dxts.backends.plugins import Created, Site
from dxts.core.adaptor.model import (
    CancelResult,
    Description,
    JobLogs,
    Payload,
    PollResult,
    Submission,
    SubmitResult,
)
from dxts.core.component import Component, Process, serve
from dxts.core.states import Kind

NAME = "relay"


class RelaySettings(BaseSettings):
    """`DXTS_RELAY_*`: where the relayed-to adaptor keeps its state and the files it writes."""

    model_config = SettingsConfigDict(env_prefix="DXTS_RELAY_")

    work_dir: str = "relay"
    storage_root: str = "storage"
    storage_elements: list[str] = ["LOCAL-DISK"]


class RelayAdaptor:
    """An `Adaptor` (`dxts.backends.logic.adaptor`) that hands each call on to another one."""

    def __init__(self, target: LocalAdaptor) -> None:
        self.target = target
        self.relayed: Counter[str] = Counter()
        self.finished = target.finished

    async def start(self) -> None:
        self.target.finished = lambda: self.finished()  # told through whatever it is set to
        await self.target.start()

    async def stop(self) -> None:
        await self.target.stop()

    async def describe(self) -> Description:
        described = await self.target.describe()
        counters = {**described.counters, **{f"relayed_{k}": n for k, n in self.relayed.items()}}
        return replace(described, name=NAME, counters=counters)

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        self.relayed["submit"] += len(parcels)
        return await self.target.submit(payload, parcels)

    async def poll(self, identifiers: Sequence[str]) -> PollResult:
        self.relayed["poll"] += 1
        return await self.target.poll(identifiers)

    async def cancel(self, identifiers: Sequence[str], parcel_ids: Sequence[str]) -> CancelResult:
        self.relayed["cancel"] += 1
        return await self.target.cancel(identifiers, parcel_ids)

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs:
        return await self.target.logs(identifier, max_bytes)


def create(site: Site, kind: Kind) -> Created:
    """The relay adaptor for a composition root (`dxts up --backend relay`)."""
    if kind is not Kind.COMPUTE:
        raise ValueError("the relay adaptor runs compute parcels only")
    settings = LocalSettings(
        name=NAME,
        kind=kind,
        work_dir=site.data_dir / NAME,
        storage_root=site.storage_root,
        storage_elements=list(site.storage_elements),
        output_se=site.storage_elements[0],
        workers=site.workers,
    )
    return Created(RelayAdaptor(LocalAdaptor(settings, site.catalogue)), NAME)


async def _build(settings: RelaySettings, process: Process) -> Component:
    return adaptor_component(
        RelayAdaptor(
            LocalAdaptor(
                LocalSettings(
                    name=NAME,
                    work_dir=settings.work_dir,
                    storage_root=settings.storage_root,
                    storage_elements=settings.storage_elements,
                    output_se=settings.storage_elements[0],
                )
            )
        )
    )


def main() -> None:
    """`dxts-backend-relay`: the relay adaptor as a process of its own, in the component shell."""
    serve("relay adaptor", RelaySettings, _build)
