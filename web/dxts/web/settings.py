"""Where dxts-web listens and where the services it reads are."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class WebSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_WEB_", extra="ignore")

    listen: str = Field("127.0.0.1:8080", description="host:port of the web server")
    definition_address: str = Field(
        "127.0.0.1:50051",
        validation_alias=AliasChoices("DXTS_DEFINITION_ADDRESS", "definition_address"),
    )
    execution_address: str = Field(
        "127.0.0.1:50052",
        validation_alias=AliasChoices("DXTS_EXECUTION_ADDRESS", "execution_address"),
    )
    accounting_address: str = Field(
        "127.0.0.1:50053",
        validation_alias=AliasChoices("DXTS_ACCOUNTING_ADDRESS", "accounting_address"),
    )
    dispatcher_address: str | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_DISPATCHER_ADDRESS", "dispatcher_address"),
        description="where a parcel page asks for the job's logs (GetParcelLogs); unset: the "
        "pages say the logs are not reachable from here",
    )
    secure_cookies: bool = Field(
        False, description="mark the session cookie Secure (served over https, behind TLS)"
    )
    session_hours: float = Field(12.0, gt=0, description="a session's lifetime")
    ticket_seconds: float = Field(300.0, gt=0, description="a one-time sign-in link's lifetime")
    poll_seconds: float = Field(2.0, gt=0, description="how often an open page refreshes")
    call_timeout_s: float = Field(10.0, gt=0, description="deadline of each service call")
