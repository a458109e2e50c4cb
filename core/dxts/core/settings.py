"""Settings shared by every component, read from the environment with the `DXTS_` prefix.

Components that need more declare their own `BaseSettings` subclass with the same prefix; this
module holds only what every process needs: where the database is, how to verify tokens, and
where to listen.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_SQLITE_URL = "sqlite+aiosqlite:///dxts.sqlite"


class DatabaseSettings(BaseSettings):
    """How to reach the one shared database."""

    model_config = SettingsConfigDict(env_prefix="DXTS_DB_", extra="ignore")

    url: str = Field(DEFAULT_SQLITE_URL, description="SQLAlchemy async URL of the database")
    pool_size: int = Field(10, ge=1)
    max_overflow: int = Field(10, ge=0)
    pool_recycle_margin_s: int = Field(
        60, ge=0, description="pool_recycle is the server's wait_timeout less this margin"
    )
    deadlock_retries: int = Field(5, ge=0)
    sqlite_busy_timeout_ms: int = Field(30_000, ge=0)


class AuthSettings(BaseSettings):
    """How bearer tokens are verified.

    `public_key` (PEM) verifies EdDSA/RS256 tokens; `shared_secret` verifies HS256 ones. With
    neither set the development key pair of the embedded default is used, which is only safe on
    a single machine: `dxts up` prints a warning saying so.
    """

    model_config = SettingsConfigDict(env_prefix="DXTS_AUTH_", extra="ignore")

    public_key: str | None = None
    public_key_file: str | None = None
    shared_secret: str | None = None
    issuer: str = "dxts"  # dxts.core.grpc.auth.DEFAULT_ISSUER (core.settings imports nothing)
    audience: str = "dxts"
    algorithms: list[str] = ["EdDSA", "RS256", "ES256", "HS256"]


class ServerSettings(BaseSettings):
    """Where a component's gRPC and metrics servers listen."""

    model_config = SettingsConfigDict(env_prefix="DXTS_", extra="ignore")

    listen: str = Field("127.0.0.1:0", description="gRPC host:port; port 0 picks a free one")
    health_listen: str | None = Field(
        None,
        description="host:port of a plain-text listener serving only gRPC health checking, "
        "for probes that cannot speak TLS; None: health is served on `listen` only",
    )
    metrics_port: int | None = Field(None, description="Prometheus HTTP port; None disables")
    shutdown_grace_s: float = Field(10.0, ge=0)
    max_workers: int = Field(16, ge=1, description="threads for sync plugins")

    @property
    def listen_host(self) -> str:
        """The host part of `listen` (brackets of an IPv6 address removed): where the metrics
        endpoint listens too."""
        return self.listen.rsplit(":", 1)[0].strip("[]") or "0.0.0.0"
