"""The built-in feeders: Seeds, Query, Edge and List (docs/extensions.md, "The built-ins").

Each yields inputs and then its bookmark (`SetFeederState`), which the core commits with the
inputs yielded before it, so a feeder interrupted anywhere resumes from its last committed
bookmark and whatever it yields again is dropped on insert by the input hash.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from uuid import UUID

import xxhash
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.catalogue import FileCatalogue, parse_where
from dxts.core.errors import InvalidArgument
from dxts.core.ids import content_hash
from dxts.core.lfn import LFN_MAX
from dxts.core.plugins import (
    FeederProposal,
    FileInput,
    Input,
    NoMoreInputs,
    Phase,
    PluginArgs,
    SetFeederState,
    Transformation,
)
from dxts.core.plugins.protocols.readers import InputOverviewReader, ParcelOutputReader
from dxts.core.states import InputStatus

# How often a long pass says where it is, so that an interruption loses little work.
BOOKMARK_EVERY = 1000


class BuiltinSettings(BaseSettings):
    """Installation defaults of the built-ins (`DXTS_BUILTINS_*`), injected where used."""

    model_config = SettingsConfigDict(env_prefix="DXTS_BUILTINS_", extra="ignore")

    scouting_fraction: float = Field(
        0.1, gt=0, le=1, description="share of a Query's files a scout takes when not told"
    )


# ------------------------------------------------------------------------------------ Seeds

# Inputs that still stand for events to come: waiting, running, or failed and awaiting the
# retry decision. Problematic ones are set aside (the workgraph's hook raises the target).
IN_FLIGHT = (InputStatus.UNASSIGNED, InputStatus.ASSIGNED, InputStatus.FAILED)


class SeedsArgs(PluginArgs):
    """Simulation: seeds until the events asked for are covered (all counts are events). The
    scout's sample is `scouting_events`, given here or set by the scouting hook
    (ScoutUntilSettled's `event_stages`); without one, a scout issues nothing and waits."""

    target_events: int = Field(ge=1)
    events_per_seed: int = Field(ge=1)
    scouting_events: int | None = Field(None, ge=1, description="the scout's sample")
    batch: int | None = Field(None, ge=1, description="events issued per invocation at most")
    max_in_flight: int | None = Field(None, ge=1, description="events in flight at most")


async def seeds_feeder(
    *,
    feeder_args: SeedsArgs,
    feeder_state: dict[str, Any],
    scouting: bool,
    transformation: Transformation,
    counts: InputOverviewReader,
) -> AsyncIterator[FeederProposal]:
    """Yield `{"seed": n}` from the cursor on while the events requested (seeds issued times
    events per seed) are below the target (`scouting_events` while scouting, none before the
    scouting hook sets it: the scout's seeds count towards the target afterwards), at most
    `batch` events per invocation and while the events in flight stay below `max_in_flight`.
    The bookmark is the next seed: an exact cursor. It never reports exhaustion: the
    workgraph's Active hook disables it once the events produced reach the target
    (docs/extensions.md, "Pacing Seeds to an event target"), raising the target on
    undershoot."""
    per_seed = feeder_args.events_per_seed
    target = feeder_args.scouting_events if scouting else feeder_args.target_events
    next_seed = _cursor(feeder_state, "next_seed")
    budget = -(-(target or 0) // per_seed) - next_seed  # seeds left to reach the target
    if feeder_args.batch is not None:
        budget = min(budget, max(1, feeder_args.batch // per_seed))
    if feeder_args.max_in_flight is not None and budget > 0:
        overview = await counts.input_overview(transformation.id)
        live = sum(overview.get(status, 0) for status in IN_FLIGHT)
        budget = min(budget, feeder_args.max_in_flight // per_seed - live)
    for issued in range(max(budget, 0)):
        yield Input(descriptor={"seed": next_seed})
        next_seed += 1
        if (issued + 1) % BOOKMARK_EVERY == 0:
            yield SetFeederState({"next_seed": next_seed})
    if budget > 0:
        yield SetFeederState({"next_seed": next_seed})


def _cursor(state: dict[str, Any], key: str) -> int:
    value = state.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(f"the bookmark's {key} is {value!r}", field=f"feeder_state.{key}")
    return value


# ------------------------------------------------------------------------------------ Query


class QueryArgs(PluginArgs):
    """A catalogue selection: metadata conditions, a run range, a file type, a scout sample."""

    conditions: dict[str, Any] = Field(default_factory=dict, description="catalogue conditions")
    file_type: str | None = None
    file_type_key: str = "file_type"
    start_run: int | None = Field(None, ge=0)
    end_run: int | None = Field(None, ge=0)
    run_key: str = "run"
    scouting_runs: list[int] | None = Field(None, min_length=1)
    scouting_fraction: float | None = Field(None, gt=0, le=1)
    descriptor_keys: list[str] | None = Field(None, description="default: [run_key]")
    page_size: int = Field(500, ge=1, le=10_000)
    exhaust_after_pass: bool = Field(False, description="NoMoreInputs after a full pass")

    @field_validator("conditions")
    @classmethod
    def _conditions(cls, conditions: dict[str, Any]) -> dict[str, Any]:
        try:
            parse_where(conditions)
        except InvalidArgument as error:
            raise ValueError(str(error)) from None
        return conditions

    @model_validator(mode="after")
    def _ordered(self) -> QueryArgs:
        start, end = self.start_run, self.end_run
        if start is not None and end is not None and start > end:
            raise ValueError(f"start_run {start} is after end_run {end}")
        return self

    def check_phase(self, phase: Phase) -> None:
        if phase is not Phase.SCOUTING:
            return
        outside = [
            run
            for run in self.scouting_runs or ()
            if (self.start_run is not None and run < self.start_run)
            or (self.end_run is not None and run > self.end_run)
        ]
        if outside:
            raise InvalidArgument(
                f"runs {outside} are outside start_run..end_run", field="scouting_runs"
            )

    def where(self, scouting: bool) -> dict[str, Any]:
        where = dict(self.conditions)
        if self.file_type is not None:
            where[self.file_type_key] = self.file_type
        if scouting and self.scouting_runs:
            where[self.run_key] = list(self.scouting_runs)
        elif self.start_run is not None or self.end_run is not None:
            where[self.run_key] = {"min": self.start_run, "max": self.end_run}
        return where


def in_sample(lfn: str, fraction: float | None) -> bool:
    """A deterministic sample by LFN: the same file is always in or always out."""
    return fraction is None or xxhash.xxh64_intdigest(lfn.encode()) < fraction * 2**64


async def query_feeder(
    *,
    feeder_args: QueryArgs,
    feeder_state: dict[str, Any],
    scouting: bool,
    catalogue: FileCatalogue,
    settings: BuiltinSettings,
) -> AsyncIterator[FeederProposal]:
    """Page through the selection after the catalogue watermark, one bookmark per page.

    The bookmark pairs the watermark with a fingerprint of the selection: a changed selection
    (the scout ended, a hook moved end_run) starts a full pass, whose repeats the core drops.
    While scouting the scout takes `scouting_runs`, else a deterministic `scouting_fraction`
    of the files (default from the installation's settings).
    """
    where = feeder_args.where(scouting)
    fraction = None
    if scouting and not feeder_args.scouting_runs:
        fraction = feeder_args.scouting_fraction or settings.scouting_fraction
    fingerprint = content_hash({"where": where, "fraction": fraction}).hex()
    watermark = feeder_state.get("watermark") if feeder_state.get("query") == fingerprint else None
    keys = feeder_args.descriptor_keys or [feeder_args.run_key]
    while True:
        page = await catalogue.query(where, after=watermark, limit=feeder_args.page_size)
        for file in page.files:
            if in_sample(file.lfn, fraction):
                descriptor = {key: file.metadata[key] for key in keys if key in file.metadata}
                yield FileInput(lfn=file.lfn, lfn_size=file.size, descriptor=descriptor)
        watermark = page.watermark
        yield SetFeederState({"query": fingerprint, "watermark": watermark})
        if not page.more:
            break
    if feeder_args.exhaust_after_pass:
        yield NoMoreInputs()


# ------------------------------------------------------------------------------------- Edge


class EdgeArgs(PluginArgs):
    """The declared output an internal edge reads (what the definition compiler writes)."""

    transformation_output_id: UUID
    page_size: int = Field(1000, ge=1, le=10_000)


async def edge_feeder(
    *, feeder_args: EdgeArgs, feeder_state: dict[str, Any], outputs: ParcelOutputReader
) -> AsyncIterator[FeederProposal]:
    """Feed the producer's files under the output from the bookmark (the largest OutputID fed)
    up to the output's commit-safe watermark (`ParcelOutputReader.settled_through`): an
    OutputID is minted before its row commits, and the watermark is the point below which
    every row is committed and none can still appear, so the bookmark never passes a row that
    commits later, and a file is fed as soon as its parcel's recording commits.

    Exhaustion: drainage is checked before the watermark is taken, and a drained producer
    writes nothing more, so the read that follows a positive check goes to the end and, once
    it has fed everything, says NoMoreInputs. No scouting branch: the upstream feeder already
    decided the sample."""
    output = feeder_args.transformation_output_id
    after = _uuid_bookmark(feeder_state)
    drained = await outputs.producer_drained(output)
    through = await outputs.settled_through(output)
    while through is not None and (after is None or after < through):
        page = await outputs.outputs(
            output, after=after, through=through, limit=feeder_args.page_size
        )
        for file in page:
            yield FileInput(lfn=file.lfn, lfn_size=file.lfn_size or 0)
        if page:
            after = page[-1].output_id
            yield SetFeederState({"after": str(after)})
        if len(page) < feeder_args.page_size:
            break
    if drained:
        yield NoMoreInputs()


def _uuid_bookmark(state: dict[str, Any]) -> UUID | None:
    text = state.get("after")
    if text is None:
        return None
    try:
        return UUID(str(text))
    except ValueError:
        raise InvalidArgument(f"{text!r} is not an OutputID", field="feeder_state.after") from None


# ------------------------------------------------------------------------------------- List


class ListItem(BaseModel):
    """One explicit input: a file (lfn with lfn_size), a descriptor, or both."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lfn: str | None = Field(None, min_length=1, max_length=LFN_MAX)
    lfn_size: int | None = Field(None, ge=0)
    descriptor: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _proposable(self) -> ListItem:
        if self.lfn is not None and self.lfn_size is None:
            raise ValueError("a file needs its lfn_size")
        if self.lfn is None and self.lfn_size is not None:
            raise ValueError("lfn_size without an lfn")
        self.proposal()  # refuse at submission what the feeder could not yield
        return self

    def proposal(self) -> Input:
        if self.lfn is not None:
            return FileInput(lfn=self.lfn, lfn_size=self.lfn_size or 0, descriptor=self.descriptor)
        return Input(descriptor=self.descriptor)


class ListArgs(PluginArgs):
    inputs: list[ListItem] = Field(min_length=1)


def list_feeder(*, feeder_args: ListArgs, feeder_state: dict[str, Any]) -> Iterator[FeederProposal]:
    """Yield the listed inputs from the cursor on, then NoMoreInputs: the list is all there is.
    The bookmark is the index of the next item (an operator appending items and re-enabling
    the feeder gets the new ones fed)."""
    start = _cursor(feeder_state, "next")
    for index in range(start, len(feeder_args.inputs)):
        yield feeder_args.inputs[index].proposal()
        if (index + 1) % BOOKMARK_EVERY == 0:
            yield SetFeederState({"next": index + 1})
    yield SetFeederState({"next": max(start, len(feeder_args.inputs))})
    yield NoMoreInputs()
