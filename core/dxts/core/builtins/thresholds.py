"""The success threshold the built-in lifecycle plugins share.

ScoutingToApproving accepts a failing scout at once so that CheckSuccessRate fails it, which
holds only if both judge the same threshold: one configuration value, `SuccessRateSettings`,
read by both, which either may override through the same two arguments. The rate is by input
fate: Problematic over settled (Processed + Problematic), so a failure HandleFailedInput retries
into a success does not count, an input still in flight counts neither way, a split parent is
replaced by its children, and a written-off input was a person's decision rather than a result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.plugins import PluginArgs
from dxts.core.plugins.protocols.lifecycle import LIVE_INPUTS
from dxts.core.states import InputStatus

I = InputStatus  # noqa: E741 - the state table's name


class SuccessRateSettings(BaseSettings):
    """The installation's threshold (`DXTS_SUCCESS_RATE_MINIMUM`, `DXTS_SUCCESS_RATE_SAMPLE`)."""

    model_config = SettingsConfigDict(env_prefix="DXTS_SUCCESS_RATE_", extra="ignore")

    minimum: float = Field(0.9, ge=0, le=1, description="lowest acceptable success rate")
    sample: int = Field(20, ge=1, description="settled inputs before the rate is judged")


class ThresholdArgs(PluginArgs):
    """Per-workgraph overrides of the threshold; a workgraph overriding one of ScoutingToApproving
    and CheckSuccessRate should give the other the same values."""

    min_success_rate: float | None = Field(None, ge=0, le=1)
    min_sample: int | None = Field(None, ge=1)

    def threshold(self, settings: SuccessRateSettings) -> Threshold:
        return Threshold(
            settings.minimum if self.min_success_rate is None else self.min_success_rate,
            settings.sample if self.min_sample is None else self.min_sample,
        )


@dataclass(frozen=True)
class Threshold:
    min_success_rate: float
    min_sample: int


@dataclass(frozen=True)
class Fates:
    """Inputs by fate, summed over one or more transformations."""

    processed: int = 0
    problematic: int = 0
    live: int = 0

    @property
    def settled(self) -> int:
        return self.processed + self.problematic

    @property
    def success_rate(self) -> float | None:
        return self.processed / self.settled if self.settled else None

    def judged(self, threshold: Threshold) -> bool:
        return self.settled >= threshold.min_sample

    def failing(self, threshold: Threshold) -> bool:
        """The sample is large enough and its success rate is below the minimum."""
        rate = self.success_rate
        return self.judged(threshold) and rate is not None and rate < threshold.min_success_rate

    def describe(self) -> str:
        rate = self.success_rate
        shown = "no" if rate is None else f"{rate:.1%} of"
        return f"{shown} {self.settled} settled inputs succeeded ({self.problematic} Problematic)"


def fates(overviews: Iterable[Mapping[InputStatus, int]]) -> Fates:
    processed = problematic = live = 0
    for overview in overviews:
        processed += overview.get(I.PROCESSED, 0)
        problematic += overview.get(I.PROBLEMATIC, 0)
        live += sum(overview.get(status, 0) for status in LIVE_INPUTS)
    return Fates(processed, problematic, live)


def listed(items: Sequence[str], shown: int = 5) -> str:
    """The first few of `items` for a message, saying how many more there are."""
    text = "; ".join(items[:shown])
    return text + (f" ... and {len(items) - shown} more" if len(items) > shown else "")
