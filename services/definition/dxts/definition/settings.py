"""The definition service's own settings (the shared ones are in dxts.core.settings).

Read from `DXTS_DEFINITION_*`, except the names the chart gives every service:
`DXTS_EXECUTION_ADDRESS` (where Flush, halts and user parcels are forwarded),
`DXTS_CONFIG_FILE` (the installation configuration, read by `dxts.core.config`'s loader, the
one every component uses) and `DXTS_DATA_DIR` (development keys).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.config import DefinitionConfig, load_installation_config


class DefinitionSettings(BaseSettings):
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
    data_dir: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_DATA_DIR", "data_dir"),
        description="where the development token key pair lives when no key is configured",
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

    def definition_config(self) -> DefinitionConfig:
        """The installation file's definition defaults (the built-in ones without a file)."""
        return load_installation_config(self.config_file).definition
