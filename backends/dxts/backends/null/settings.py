"""The null adaptor's settings (`DXTS_NULL_*`): when parcels finish and how.

The outcome of each parcel is drawn from the configured mix by a stable hash of its ParcelID, so
a run is reproducible and a re-submitted parcel ends the same way. Fractions are of all parcels;
what they leave over succeeds:

* `failure` — the backend reports FAILED;
* `split` — SUCCEEDED, each input reported SPLIT into `split_parts` children of which the first
  `split_success_fraction` (rounded) succeeded and the rest failed;
* `no_report` — SUCCEEDED without a status report;
* `lost` — never finishes (only a cancellation ends it): a backend that loses work;
* success — SUCCEEDED, every input SUCCESS, one file per name in `outputs`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.states import Kind


class NullSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_NULL_", extra="ignore")

    name: str = Field("null", min_length=1, max_length=32)
    kind: Kind = Kind.COMPUTE
    delay_s: float = Field(0.0, ge=0, description="from acceptance to the outcome")
    failure: float = Field(0.0, ge=0, le=1)
    split: float = Field(0.0, ge=0, le=1)
    no_report: float = Field(0.0, ge=0, le=1)
    lost: float = Field(0.0, ge=0, le=1)
    split_parts: int = Field(2, ge=2)
    split_success_fraction: float = Field(0.5, ge=0, le=1)
    outputs: list[str] = Field(default_factory=list, description="CWL output ids to report")
    output_size: int = Field(0, ge=0)
    capacity: int = Field(0, ge=0, description="parcels in flight before Submit refuses; 0: any")
    report_mode: Literal["pull", "push"] = "pull"
    dispatcher_address: str | None = Field(
        None, validation_alias=AliasChoices("DXTS_DISPATCHER_ADDRESS", "dispatcher_address")
    )
    push_interval_s: float = Field(1.0, gt=0)

    @field_validator("kind", mode="before")
    @classmethod
    def _parse_kind(cls, value: Any) -> Any:
        if isinstance(value, str):
            for member in Kind:
                if member.value.lower() == value.removeprefix("KIND_").lower():
                    return member
        return value

    @model_validator(mode="after")
    def _mix(self) -> NullSettings:
        if self.failure + self.split + self.no_report + self.lost > 1 + 1e-9:
            raise ValueError("failure + split + no_report + lost must not exceed 1")
        if self.report_mode == "push" and not self.dispatcher_address:
            raise ValueError("report_mode push needs DXTS_DISPATCHER_ADDRESS")
        return self
