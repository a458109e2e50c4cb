"""The definition service's own settings (the shared ones are in dxts.core.settings), and its
lifecycle engine's.

Read from `DXTS_DEFINITION_*`, except the names the chart gives every service:
`DXTS_EXECUTION_ADDRESS` (where Flush, halts and user parcels are forwarded),
`DXTS_CONFIG_FILE` (the installation configuration, read by `dxts.core.config`'s loader, the
one every component uses), `DXTS_DATA_DIR` (development keys) and `DXTS_STORAGE_ENDPOINTS`
(the installation's SEs: a data member writing to a read-only one is refused at submission).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from dxts.core.config import DefinitionConfig, load_installation_config
from dxts.core.settings import DataDirSettings, ServiceTokenSettings
from dxts.core.storage import StorageEndpoint, parse_endpoints
from dxts.definition.logic.attention import AttentionRules

WEEK_S = 7 * 24 * 3600.0


class DefinitionSettings(DataDirSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_DEFINITION_", extra="ignore")

    execution_address: str | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_EXECUTION_ADDRESS", "execution_address"),
        description="host:port of the execution service; None: Flush, halts and user jobs "
        "answer UNAVAILABLE",
    )
    config_file: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_CONFIG_FILE", "config_file"),
        description="the installation configuration (YAML); None: the built-in defaults",
    )
    storage_endpoints: Annotated[dict[str, StorageEndpoint], NoDecode] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("DXTS_STORAGE_ENDPOINTS", "storage_endpoints"),
        description="the installation's SEs (dxts.core.storage): a data member replicating "
        "to, or removing from, a read-only one is refused at submission",
    )
    operator_role: str = Field(
        "operator",
        min_length=1,
        description="token role that may steer every workgraph of its VO and force sign-offs",
    )
    service_role: str = Field(
        "service",
        min_length=1,
        description="token role of dxts's own components: sees every VO's transformations and "
        "processes (the execution sweeps, the dispatcher), steers nothing",
    )

    attention_failure_rate: float = Field(
        0.25,
        ge=0,
        le=1,
        description="a member needs attention when more than this share of its last "
        "`attention_window` ended parcels failed",
    )
    attention_window: int = Field(
        20, ge=1, le=1000, description="how many of a member's last ended parcels the rate counts"
    )
    attention_min_ended: int = Field(
        3, ge=1, description="the fewest ended parcels a failure rate is judged on"
    )
    attention_stall_minutes: float = Field(
        30.0,
        gt=0,
        description="a running member with work to do and no parcel ended for this long needs "
        "attention",
    )

    attention_packer_failed_minutes: float = Field(
        30.0,
        gt=0,
        description="a member whose packer failed (a round's or a flush's invocation) this "
        "recently needs attention",
    )

    attention_metrics_interval_s: float = Field(
        60.0,
        gt=0,
        description="how often the attention gauges are measured (with the lifecycle engine)",
    )

    @field_validator("storage_endpoints", mode="before")
    @classmethod
    def _endpoints(cls, value: Any) -> dict[str, StorageEndpoint]:
        return parse_endpoints(value)

    @property
    def read_only_ses(self) -> frozenset[str]:
        """The SEs nothing may be written to or removed from."""
        return frozenset(name for name, e in self.storage_endpoints.items() if e.read_only)

    def attention_rules(self) -> AttentionRules:
        """The thresholds of the attention rules (`logic.attention`)."""
        return AttentionRules(
            failure_rate=self.attention_failure_rate,
            window=self.attention_window,
            min_ended=min(self.attention_min_ended, self.attention_window),
            stall_s=self.attention_stall_minutes * 60,
            packer_window_s=self.attention_packer_failed_minutes * 60,
        )

    def definition_config(self) -> DefinitionConfig:
        """The installation file's definition defaults (the built-in ones without a file)."""
        return load_installation_config(self.config_file).definition


class LifecycleSettings(ServiceTokenSettings):
    """The lifecycle engine's settings (`DXTS_LIFECYCLE_*`, and the names every component
    shares).

    The engine calls accounting (GetCounts: the drain guard and every hook's input overview) and
    execution (flushes, cancellations, clean-ups and the reads of the built-in actions) as dxts's
    own component, with the service token (`DXTS_SERVICE_TOKEN` or `DXTS_SERVICE_TOKEN_FILE`; with
    neither, one minted from the development key pair in `DXTS_DATA_DIR`, single machine only).
    """

    model_config = SettingsConfigDict(env_prefix="DXTS_LIFECYCLE_", extra="ignore")

    interval_s: float = Field(
        30.0, gt=0, description="the longest pause between two rounds while nothing moves"
    )
    concurrency: int = Field(8, ge=1, description="workgraphs swept at the same time")
    stop_grace_s: float = Field(
        5.0, ge=0, description="how long a running round may finish when the engine stops"
    )
    archive_delay_s: float = Field(
        WEEK_S, ge=0, description="how long a workgraph stays Completed before Archiving"
    )
    default_scouting_hook: str | None = Field(
        "ScoutUntilSettled",
        description="the ScoutingToApproving hook of a workgraph that binds none (None: the "
        "scout ends only when an operator says so)",
    )
    accounting_address: str | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_ACCOUNTING_ADDRESS", "accounting_address"),
        description="host:port of the accounting service (exact counts)",
    )
