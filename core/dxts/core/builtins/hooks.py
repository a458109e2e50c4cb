"""The built-in hooks: RetryUntilMaxErrors (HandleFailedInput, the default binding).

A Failed input goes back to Unassigned to be packed again until its ErrorCount — the failed
parcels it has been part of since it was last reset — reaches the maximum, and is then set
aside as Problematic for an operator, with the reason its last parcel gave. The maximum is the
binding's `max_errors` argument, else the installation's `DXTS_HOOK_RETRY_MAX_ERRORS`.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.plugins import InputRecord, Parcel, PluginArgs, ToProblematic, ToUnassigned, hook


class RetrySettings(BaseSettings):
    """The installation's default retry budget."""

    model_config = SettingsConfigDict(env_prefix="DXTS_HOOK_RETRY_", extra="ignore")

    max_errors: int = Field(3, ge=1, description="failed parcels an input may be part of")


class RetryArgs(PluginArgs):
    max_errors: int | None = Field(
        None, ge=1, description="failed parcels an input may be part of (default: settings)"
    )


@hook("HandleFailedInput")
def retry_until_max_errors(
    *, input: InputRecord, parcel: Parcel | None, args: RetryArgs, settings: RetrySettings
) -> ToUnassigned | ToProblematic:
    limit = args.max_errors or settings.max_errors
    if input.error_count < limit:
        return ToUnassigned()
    why = f": {parcel.reason}" if parcel is not None and parcel.reason else ""
    return ToProblematic(reason=f"failed in {input.error_count} parcels (limit {limit}){why}")
