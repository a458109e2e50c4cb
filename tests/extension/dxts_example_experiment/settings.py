"""The experiment's configuration: injected into any plugin that annotates a parameter with it."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ExperimentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_EXAMPLE_", extra="ignore")

    scouting_fraction: float = Field(0.05, gt=0, le=1, description="scout sample by default")
    max_errors: int = Field(5, ge=1, description="failures before an input is set aside")
