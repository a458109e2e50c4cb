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

`rules` come before the mix (failure injection by input): the first rule that matches a parcel
decides its fate, for the first `times` parcels it matches, optionally with a delay of its own,
and — `cancellable` false — ignoring Cancel (a job that runs to its end regardless: Cancel is best
effort). A rule matches a parcel carrying an
input whose descriptor holds every key and value of the rule's `descriptor` (a non-file input
reaches the adaptor as its descriptor's JSON, the CWL value the packers write) or whose LFN
contains the rule's `lfn` (a compute parcel's File inputs, a data parcel's request files), or a
parcel whose output prefix contains the rule's `output_prefix` (it names the transformation).
A split child's descriptor carries an opaque `mask` ("part/parts") beside `split_of` and `part`.

A failure rule may say how the backend reports it: `backend_status` (the raw status, else the
fate's name), `message`, `exit_code`, the failure's class (`failure_class`, default
application-error: an injected failure stands for a payload that failed) and the tool's own line
(`tool_message`); and `while_below` limits a rule to parcels asking less
than the given requirements (`{"memory_mb": 4000}`: a parcel whose requirements give no
`memory_mb`, or less than 4000) — out of memory until a retry asks for enough.

`usage` is the resource usage every finished (succeeded or failed) parcel reports as measured
(`Outcome.usage`; default: none reported, as before); a rule's `usage` replaces it for the
parcels the rule decides. Only the measures given are reported.

`retain_s` bounds its memory in a long run: a job whose outcome reached the dispatcher that long
ago (polled, or pushed and acknowledged) is forgotten, as a batch system forgets old jobs; a Poll
of it then answers "unknown" and a Submit of its parcel starts it anew. Counting from the report,
not from the finish, means a backlog of unpolled outcomes is never forgotten unheard. Unset (the
default), it remembers every job for its lifetime, so a test can check every Submit of a run.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import SettingsConfigDict

from dxts.core.adaptor.model import FailureClass
from dxts.core.settings import KindSetting, ServiceTokenSettings
from dxts.core.states import Kind

# A rule may also say not_tried: the job ran but reached none of its inputs (NOT_TRIED each).
Fate = Literal["success", "failure", "split", "no_report", "lost", "not_tried"]


class NullUsage(BaseModel):
    """A usage to report as measured (Outcome.usage); a measure left out is not reported."""

    model_config = ConfigDict(extra="forbid")

    cpu_seconds: float | None = Field(None, ge=0, description="user + system CPU, in seconds")
    wall_seconds: float | None = Field(None, ge=0, description="elapsed, in seconds")
    max_memory_bytes: int | None = Field(None, ge=0, description="largest process's peak RSS")


class NullRule(BaseModel):
    """One injected fate, for the parcels carrying a matching input (see the module)."""

    model_config = ConfigDict(extra="forbid")

    fate: Fate
    descriptor: dict[str, Any] | None = Field(None, description="held by an input's descriptor")
    lfn: str | None = Field(None, min_length=1, description="contained in an input's LFN")
    output_prefix: str | None = Field(
        None, min_length=1, description="contained in the parcel's output prefix"
    )
    times: int | None = Field(None, ge=1, description="parcels it decides; None: every one")
    delay_s: float | None = Field(None, ge=0, description="instead of the adaptor's delay_s")
    cancellable: bool = Field(True, description="false: Cancel leaves the job running")
    usage: NullUsage | None = Field(None, description="instead of the adaptor's usage")
    backend_status: str | None = Field(None, description="the raw status it reports")
    message: str | None = Field(None, description="a failure's message")
    exit_code: int | None = Field(None, description="the exit code it reports")
    failure_class: FailureClass = Field(
        FailureClass.APPLICATION_ERROR, description="the failure's class it reports"
    )
    tool_message: str = Field("", description="the tool's own line it reports")
    while_below: dict[str, float] | None = Field(
        None, min_length=1, description="only for parcels asking less than these requirements"
    )

    def applies_to(self, requirements: dict[str, Any]) -> bool:
        """Whether the parcel's requirements are below `while_below` (a missing one is)."""
        for key, limit in (self.while_below or {}).items():
            asked = requirements.get(key)
            if isinstance(asked, int | float) and asked >= limit:
                return False
        return True

    @model_validator(mode="after")
    def _matches_something(self) -> NullRule:
        given = [self.descriptor, self.lfn, self.output_prefix]
        if sum(value is not None for value in given) != 1:
            raise ValueError("a rule matches by descriptor, lfn or output_prefix (one of them)")
        return self

    def matches(self, descriptor: dict[str, Any] | None, lfn: str | None) -> bool:
        """Whether one carried input matches (a descriptor or an lfn rule)."""
        if self.lfn is not None:
            return lfn is not None and self.lfn in lfn
        assert self.descriptor is not None
        return descriptor is not None and all(
            key in descriptor and descriptor[key] == value for key, value in self.descriptor.items()
        )


class NullSettings(ServiceTokenSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_NULL_", extra="ignore")

    name: str = Field("null", min_length=1, max_length=32)
    kind: KindSetting = Kind.COMPUTE
    delay_s: float = Field(0.0, ge=0, description="from acceptance to the outcome")
    failure: float = Field(0.0, ge=0, le=1)
    split: float = Field(0.0, ge=0, le=1)
    no_report: float = Field(0.0, ge=0, le=1)
    lost: float = Field(0.0, ge=0, le=1)
    split_parts: int = Field(2, ge=2)
    split_success_fraction: float = Field(0.5, ge=0, le=1)
    outputs: list[str] = Field(default_factory=list, description="CWL output ids to report")
    output_size: int = Field(0, ge=0)
    rules: list[NullRule] = Field(default_factory=list, description="fates by input, first")
    usage: NullUsage | None = Field(None, description="reported by finished parcels; None: none")
    capacity: int = Field(0, ge=0, description="parcels in flight before Submit refuses; 0: any")
    report_mode: Literal["pull", "push"] = "pull"
    dispatcher_address: str | None = Field(
        None, validation_alias=AliasChoices("DXTS_DISPATCHER_ADDRESS", "dispatcher_address")
    )
    push_interval_s: float = Field(1.0, gt=0)
    retain_s: float | None = Field(
        None,
        gt=0,
        description="how long a job is remembered after its outcome was reported (polled, or"
        " pushed and acknowledged); None: for the adaptor's lifetime",
    )

    @model_validator(mode="after")
    def _mix(self) -> NullSettings:
        if self.failure + self.split + self.no_report + self.lost > 1 + 1e-9:
            raise ValueError("failure + split + no_report + lost must not exceed 1")
        if self.report_mode == "push" and not self.dispatcher_address:
            raise ValueError("report_mode push needs DXTS_DISPATCHER_ADDRESS")
        return self
