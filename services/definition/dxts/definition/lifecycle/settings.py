"""The lifecycle engine's settings (`DXTS_LIFECYCLE_*`, and the names every component shares).

The engine calls accounting (GetCounts: the drain guard and every hook's input overview) and
execution (flushes, cancellations, clean-ups and the reads of the built-in actions) as dxts's own
component, with the service token (`DXTS_SERVICE_TOKEN` or `DXTS_SERVICE_TOKEN_FILE`; with
neither, one minted from the development key pair in `DXTS_DATA_DIR`, single machine only).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

WEEK_S = 7 * 24 * 3600.0


class LifecycleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_LIFECYCLE_", extra="ignore")

    interval_s: float = Field(30.0, gt=0, description="pause between two sweeps")
    concurrency: int = Field(8, ge=1, description="workgraphs swept at the same time")
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
    service_token: str | None = Field(
        None, validation_alias=AliasChoices("DXTS_SERVICE_TOKEN", "service_token")
    )
    service_token_file: Path | None = Field(
        None, validation_alias=AliasChoices("DXTS_SERVICE_TOKEN_FILE", "service_token_file")
    )

    def token(self) -> str | None:
        if self.service_token:
            return self.service_token
        if self.service_token_file is not None:
            return self.service_token_file.read_text().strip()
        return None
