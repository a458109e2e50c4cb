"""The accounting service's own settings (the shared ones are in dxts.core.settings).

Tunables are read from `DXTS_ACCOUNTING_*`; the definition service's address is the one the
chart gives every service, `DXTS_DEFINITION_ADDRESS`, and the development key directory the
embedded default's `DXTS_DATA_DIR`.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from dxts.core.settings import DataDirSettings


class AccountingSettings(DataDirSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_ACCOUNTING_", extra="ignore")

    definition_address: str | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_DEFINITION_ADDRESS", "definition_address"),
        description="host:port of the definition service (workgraph members); None disables "
        "GetWorkgraphSummary",
    )
    fold_batch: int = Field(1000, ge=1, description="journal rows per fold transaction")
    fold_interval_s: float = Field(
        1.0, gt=0, description="pause after a fold that did not fill its batch"
    )
    fold_lease_s: float = Field(
        60.0, ge=0, description="how long a replica keeps the fold lock before offering it"
    )
    fold_standby_s: float = Field(
        10.0, gt=0, description="how often a replica without the fold lock tries to take it"
    )
    metrics_interval_s: float = Field(15.0, gt=0, description="journal and InnoDB metrics")
    drift_interval_s: float = Field(60.0, gt=0, description="full scan for negative counts")
    drift_debounce_s: float = Field(
        1.0, ge=0, description="least pause between two drift scans woken by reads"
    )
