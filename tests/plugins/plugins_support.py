"""Plugins for the framework's own tests: one of each shape, and each kind of mistake."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.errors import InvalidArgument
from dxts.core.plugins import (
    Accept,
    ActionResult,
    ComputeParcel,
    FileInput,
    Input,
    InputRecord,
    NoMoreInputs,
    Operation,
    Parcel,
    Phase,
    PluginArgs,
    SetFeederState,
    ToUnassigned,
    Transformation,
    action,
    hook,
)
from dxts.core.states import InputStatus, Kind, TransformationStatus


class SeedArgs(PluginArgs):
    count: int = Field(3, ge=0)
    scouting_count: int | None = Field(None, ge=1)

    def check_phase(self, phase: Phase) -> None:
        if phase is Phase.SCOUTING and self.scouting_count is None:
            raise InvalidArgument("a scout needs a sample size", field="scouting_count")


class Counter:
    """An injected dependency: records the thread each call ran on."""

    def __init__(self) -> None:
        self.threads: list[str] = []


class Catalogue:
    """Stands for an injected service nobody provides in some tests."""


class Knobs(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_TEST_KNOBS_", extra="ignore")
    depth: int = 2


def seeds(
    *, feeder_args: SeedArgs, feeder_state: dict[str, Any], scouting: bool, counter: Counter
) -> Iterator[Any]:
    counter.threads.append(threading.current_thread().name)
    start = feeder_state.get("next", 0)
    count = feeder_args.scouting_count if scouting else feeder_args.count
    for seed in range(start, start + (count or 0)):
        counter.threads.append(threading.current_thread().name)
        yield Input(descriptor={"seed": seed})
    yield SetFeederState({"next": start + (count or 0)})


async def async_seeds(*, feeder_args: SeedArgs, knobs: Knobs) -> AsyncIterator[Any]:
    for seed in range(feeder_args.count):
        await asyncio.sleep(0)
        yield Input(descriptor={"seed": seed, "depth": knobs.depth})
    yield NoMoreInputs()


def endless(*, counter: Counter) -> Iterator[Input]:
    """Counts what it produced and records that it was closed, and where."""
    produced = 0
    try:
        while True:
            produced += 1
            counter.threads.append(str(produced))
            yield Input(descriptor={"n": produced})
    finally:
        counter.threads.append(f"closed in {threading.current_thread().name}")


def listed() -> list[Any]:
    return [FileInput(lfn="/a", lfn_size=1), NoMoreInputs()]


def exhausted() -> NoMoreInputs:
    return NoMoreInputs()


def nothing() -> None:
    return None


def negative_size() -> Iterator[Any]:
    yield FileInput(lfn="/ok", lfn_size=1)
    yield FileInput(lfn="/bad", lfn_size=-1)


def unhashable_descriptor() -> Iterator[Any]:
    yield Input(descriptor={"runs": {1, 2}})


async def queries_badly() -> AsyncIterator[Any]:
    """Passes a bad query to a service, which refuses it: the plugin's failure, not a proposal."""
    from dxts.core.catalogue import parse_where

    parse_where({"run": {"min": 2, "max": 1}})
    yield NoMoreInputs()


def yields_a_dict() -> Iterator[Any]:
    yield {"lfn": "/a", "lfn_size": 1}


def input_after_the_end() -> Iterator[Any]:
    yield NoMoreInputs()
    yield SetFeederState({"done": True})
    yield Input(descriptor={"late": True})


def raises() -> Iterator[Any]:
    yield Input(descriptor={"seed": 0})
    raise RuntimeError("catalogue unreachable")


class GroupArgs(PluginArgs):
    size: int = Field(ge=1)


def pairs(
    *, inputs: Iterator[InputRecord], packer_args: GroupArgs, flush: bool, counter: Counter
) -> Iterator[ComputeParcel]:
    counter.threads.append(threading.current_thread().name)
    group: list[uuid.UUID] = []
    for record in inputs:
        group.append(record.id)
        if len(group) == packer_args.size:
            yield ComputeParcel(inputs=group, metadata={"first": str(group[0])})
            group = []
    if group and flush:
        yield ComputeParcel(inputs=group)


async def async_pairs(
    *, inputs: AsyncIterator[InputRecord], packer_args: GroupArgs
) -> AsyncIterator[ComputeParcel]:
    group: list[uuid.UUID] = []
    async for record in inputs:
        group.append(record.id)
        if len(group) == packer_args.size:
            yield ComputeParcel(inputs=group)
            group = []


def packer_yielding_inputs(*, inputs: Iterator[InputRecord]) -> Iterator[Input]:
    for record in inputs:
        yield Input(descriptor={"id": str(record.id)})


class RetryArgs(PluginArgs):
    max_errors: int = Field(3, ge=1)


@hook("HandleFailedInput")
def retry(*, input: InputRecord, args: RetryArgs, counter: Counter) -> Any:
    counter.threads.append(threading.current_thread().name)
    return ToUnassigned() if input.error_count < args.max_errors else "give up"


@hook("TransformationActive")
async def extend_feeder(*, transformation: Transformation, args: RetryArgs) -> Operation | None:
    if args.max_errors == 1:
        return None
    return Operation(feeder_args={"count": args.max_errors}, flush=True)


@hook("TransformationActive")
async def bad_feeder_args(*, transformation: Transformation) -> Operation:
    return Operation(feeder_args={"count": -1})


@hook("WorkgraphActive")
async def govern(*, transformations: list[Transformation], args: GovernArgs) -> Any:
    if args.mode == "accept":
        return Accept()
    if args.mode == "stranger":
        return {str(uuid.uuid4()): Operation(pause=True)}
    return {str(member.id): Operation(feeder_enabled=False) for member in transformations}


@hook("ScoutingToApproving")
async def accept(*, transformations: list[Transformation]) -> Accept:
    return Accept()


class GovernArgs(PluginArgs):
    mode: str = "disable"


@action("Finalizing", "Archiving")
async def check(*, transformation: Transformation, input_overview: dict[str, int]) -> Any:
    if input_overview.get(InputStatus.PROBLEMATIC, 0):
        return ActionResult.failed(f"{input_overview[InputStatus.PROBLEMATIC]} problematic")
    return ActionResult.passed() if transformation.feeder_enabled is False else "yes"


class LooseArgs(BaseModel):
    """Ignores unknown keys: a misspelt argument would pass unnoticed."""

    size: int = 1


class ContextArgs(BaseModel):
    """The phase rule written as a plain pydantic validator reading the validation context."""

    model_config = ConfigDict(extra="forbid")
    sample: int | None = None

    @model_validator(mode="after")
    def _scout_needs_a_sample(self, info: ValidationInfo) -> ContextArgs:
        if (info.context or {}).get("phase") == Phase.SCOUTING and self.sample is None:
            raise ValueError("a scout needs a sample")
        return self


def loose(*, packer_args: LooseArgs) -> None:
    return None


def context_checked(*, feeder_args: ContextArgs) -> None:
    return None


def not_a_model(*, feeder_args: dict[str, Any]) -> None:
    return None


def positional_only(feeder_state: dict[str, Any], /) -> None:
    return None


def star_args(*args: Any) -> None:
    return None


def unannotated(*, feeder_args: SeedArgs, mystery) -> None:  # type: ignore[no-untyped-def]
    return None


def needs_catalogue(*, catalogue: Catalogue) -> None:
    return None


def maybe_catalogue(*, catalogue: Catalogue | None = None) -> list[Any]:
    return [Input(descriptor={"had": catalogue is not None})]


def undecorated_hook(*, input: InputRecord) -> ToUnassigned:
    return ToUnassigned()


@hook("HandleFailedInput")
def generator_hook(*, input: InputRecord) -> Iterator[ToUnassigned]:
    yield ToUnassigned()


def transformation(feeder: str | None = "Seeds", *, enabled: bool = True) -> Transformation:
    return Transformation(
        id=uuid.uuid4(),
        type="MCSimulation",
        kind=Kind.COMPUTE,
        status=TransformationStatus.ACTIVE,
        feeder=feeder,
        feeder_args={},
        feeder_enabled=enabled,
        packer="Pairs",
        packer_args={"size": 2},
    )


def failed_parcel() -> Parcel:
    from dxts.core.states import ParcelStatus

    return Parcel(uuid.uuid4(), Kind.COMPUTE, ParcelStatus.FAILED, reason="Stalled")
