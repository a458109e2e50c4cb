"""The bookkeeping query: the feeder's arguments and what they select in the file catalogue."""

from __future__ import annotations

from typing import Any

import xxhash
from pydantic import Field, model_validator

from dxts.core.errors import InvalidArgument
from dxts.core.ids import content_hash
from dxts.core.plugins import Phase, PluginArgs

RUN_KEY = "run"
EVENT_TYPE_KEY = "event_type"
CONDITIONS_KEY = "conditions_description"

Value = str | int


class BookkeepingArgs(PluginArgs):
    """A dataset by its bookkeeping conditions and run range, and how to sample it."""

    conditions_dict: dict[str, Value | list[Value]] = Field(default_factory=dict)
    event_type: str | None = None
    conditions_description: str | None = None
    start_run: int | None = Field(None, ge=0)
    end_run: int | None = Field(None, ge=0)
    scouting_runs: list[int] | None = Field(None, min_length=1)
    scouting_fraction: float | None = Field(None, gt=0, le=1)
    sampling_fraction: float | None = Field(None, gt=0, le=1)
    descriptor_keys: list[str] = Field(default_factory=lambda: [RUN_KEY])
    page_size: int = Field(500, ge=1, le=10_000)
    exhaust_after_pass: bool = False

    @model_validator(mode="after")
    def _ordered_runs(self) -> BookkeepingArgs:
        start, end = self.start_run, self.end_run
        if start is not None and end is not None and start > end:
            raise ValueError(f"start_run {self.start_run} is after end_run {self.end_run}")
        return self

    def check_phase(self, phase: Phase) -> None:
        """While scouting the scout takes its own sample, from inside the run range."""
        if phase is not Phase.SCOUTING:
            return
        if self.sampling_fraction is not None:
            raise InvalidArgument(
                "not while scouting: the scout samples with scouting_runs or scouting_fraction",
                field="sampling_fraction",
            )
        outside = [run for run in self.scouting_runs or () if not self.covers(run)]
        if outside:
            raise InvalidArgument(
                f"runs {outside} are outside start_run..end_run", field="scouting_runs"
            )

    def covers(self, run: int) -> bool:
        return (self.start_run is None or run >= self.start_run) and (
            self.end_run is None or run <= self.end_run
        )

    def where(self, phase: Phase) -> dict[str, Any]:
        """The catalogue conditions this dataset is, in `phase`."""
        where: dict[str, Any] = dict(self.conditions_dict)
        if self.event_type is not None:
            where[EVENT_TYPE_KEY] = self.event_type
        if self.conditions_description is not None:
            where[CONDITIONS_KEY] = self.conditions_description
        if phase is Phase.SCOUTING and self.scouting_runs:
            where[RUN_KEY] = self.scouting_runs
        elif self.start_run is not None or self.end_run is not None:
            where[RUN_KEY] = {"min": self.start_run, "max": self.end_run}
        return where

    def fraction(self, phase: Phase, default_scouting_fraction: float) -> float | None:
        """The share of the matching files taken, if not all of them."""
        if phase is Phase.SCOUTING and not self.scouting_runs:
            return self.scouting_fraction or default_scouting_fraction
        return self.sampling_fraction

    def fingerprint(self, phase: Phase, fraction: float | None) -> str:
        """Identifies the selection: a bookmark is only valid for the selection it was made for."""
        return content_hash({"where": self.where(phase), "fraction": fraction}).hex()


def in_sample(lfn: str, fraction: float | None) -> bool:
    """A deterministic sample: the same LFN is always in or always out for one fraction."""
    return fraction is None or xxhash.xxh64_intdigest(lfn.encode()) < fraction * 2**64
