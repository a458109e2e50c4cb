"""The execution service's own settings (the shared ones are in dxts.core.settings).

Tunables are read from `DXTS_EXECUTION_*`; what every component shares keeps its common name:
`DXTS_DEFINITION_ADDRESS` (the Active transformations and their definitions),
`DXTS_CONFIG_FILE` (the installation file: its `policy` holds the feeding quotas),
`DXTS_SERVICE_TOKEN` / `DXTS_SERVICE_TOKEN_FILE` (the credentials of execution's own calls; with
neither, a token minted from the development key pair in `DXTS_DATA_DIR`, a single machine
only). The file catalogue is configured by `DXTS_CATALOGUE_*` (`CatalogueSettings`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from dxts.core.config import load_installation_config
from dxts.core.policy import Policy
from dxts.core.settings import ServiceTokenSettings


class ExecutionSettings(ServiceTokenSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_EXECUTION_", extra="ignore")

    definition_address: str | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_DEFINITION_ADDRESS", "definition_address"),
        description="host:port of the definition service",
    )
    call_timeout_s: float = Field(30.0, gt=0, description="deadline of execution's own calls")
    config_file: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_CONFIG_FILE", "config_file"),
        description="the installation configuration (YAML): its policy's quotas hold feeders",
    )

    feed_interval_s: float = Field(
        10.0, gt=0, description="longest wait after an idle feeder round (a busy one: none)"
    )
    pack_interval_s: float = Field(
        10.0, gt=0, description="longest wait after an idle packer round (a busy one: none)"
    )
    watermark_interval_s: float = Field(
        0.5,
        ge=0,
        description="shortest time between two reads of an Edge feeder's watermark (each waits"
        " for the recordings under the output and holds new ones back)",
    )
    sweep_concurrency: int = Field(
        8, ge=1, description="transformations one sweep works on at the same time"
    )
    feed_batch: int = Field(5000, ge=1, description="inputs per feeder transaction")
    claim_chunk: int = Field(1000, ge=1, description="inputs claimed per packer claim")
    pack_batch: int = Field(2000, ge=1, description="inputs decided per packer transaction")
    stop_grace_s: float = Field(
        5.0, ge=0, description="how long a stopping sweep may finish its round"
    )

    # -- outcome recording, failed inputs, operations (part 2) ------------------------------------

    record_interval_s: float = Field(
        2.0, gt=0, description="longest wait after an idle round of recording Completing parcels"
    )
    record_batch: int = Field(500, ge=1, description="parcels recorded per transaction")
    record_batch_inputs: int = Field(
        20_000,
        ge=1,
        description="inputs the parcels recorded in one transaction carry, at most (a parcel "
        "carrying more is recorded alone): bounds the recorder's memory",
    )
    failed_inputs_interval_s: float = Field(
        10.0, gt=0, description="longest wait after an idle HandleFailedInput round"
    )
    failed_inputs_batch: int = Field(500, ge=1, description="Failed inputs decided per transaction")
    operation_batch: int = Field(
        1000, ge=1, description="inputs or parcels an operator operation moves per transaction"
    )
    clean_max_rows: int = Field(
        50_000, ge=1, description="rows one CleanTransformation call deletes at most"
    )
    operator_role: str = Field(
        "operator",
        min_length=1,
        description="token role that may steer every transformation and job of its VO",
    )
    service_role: str = Field(
        "service",
        min_length=1,
        description="token role of dxts's own components (every VO; RecordOutcomes)",
    )

    def policy(self) -> Policy:
        """The installation's policy (`policy` of the installation file; none: no quota)."""
        return load_installation_config(self.config_file).definition.policy
