"""Settings shared by every component, read from the environment with the `DXTS_` prefix.

Components that need more declare their own `BaseSettings` subclass with the same prefix; this
module holds only what every process needs: where the database is, how to verify tokens, and
where to listen, and the blocks that components' own settings extend: the development key
pair's directory (`DataDirSettings`) and the service token of the components that call others
(`ServiceTokenSettings`).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, BeforeValidator, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.states import Kind

DEFAULT_SQLITE_URL = "sqlite+aiosqlite:///dxts.sqlite"
# The async driver dxts runs each database with, for a URL that names the database only (the
# `mysql://user@host/db` a MariaDB user types).
ASYNC_DRIVERS = {"mysql": "asyncmy", "mariadb": "asyncmy", "sqlite": "aiosqlite"}


def parse_kind(value: Any) -> Any:
    """ "compute", "Compute" and "KIND_COMPUTE" all mean Kind.COMPUTE: the chart writes
    lowercase, the protocol's enum names carry the prefix. Anything else is left for the
    field's own validation to refuse."""
    if isinstance(value, str):
        text = value.removeprefix("KIND_").lower()
        for member in Kind:
            if member.value.lower() == text:
                return member
    return value


# The kind of parcels a setting names (a backend's, an adaptor's), spelled as `parse_kind` reads.
KindSetting = Annotated[Kind, BeforeValidator(parse_kind)]


def async_database_url(url: str) -> str:
    """`url` with dxts's async driver when it names none (`mysql://`, `mariadb://` and
    `sqlite://` become `mysql+asyncmy://` and `sqlite+aiosqlite://`).

    Raises InvalidArgument, in one line (the caller names the option), for a URL SQLAlchemy
    cannot read, a database dxts does not run on, or a synchronous driver (`mysql+pymysql://`).
    """
    import sqlalchemy as sa  # only the processes that open a database pay for it

    from dxts.core.errors import InvalidArgument

    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise InvalidArgument(
            f"{url!r} is not a database URL (e.g. mysql+asyncmy://user:pw@host:3306/dxts or "
            "sqlite+aiosqlite:///path/dxts.sqlite)"
        ) from None
    # From the text: SQLAlchemy's get_driver_name() loads the dialect, failing for one it lacks.
    backend, _, driver = parsed.drivername.partition("+")
    wanted = ASYNC_DRIVERS.get(backend)
    if wanted is None:
        raise InvalidArgument(
            f"unsupported database {backend!r}: dxts runs on MariaDB/MySQL or SQLite"
        )
    if not driver:
        parsed = parsed.set(drivername=f"{'mysql' if wanted == 'asyncmy' else backend}+{wanted}")
    elif driver not in ("asyncmy", "aiomysql", "aiosqlite"):
        raise InvalidArgument(
            f"the driver {driver!r} is not asynchronous: use {backend}+{wanted}://"
        )
    return parsed.render_as_string(hide_password=False)


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
    failover_wait_s: float = Field(
        20.0,
        ge=0,
        description="how long a transaction that lost its connection is replayed for while the "
        "database fails over (a proxy moving to another Galera node, a node regaining quorum)",
    )
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


# The roles DiracX security properties give a dxts caller by default: only people's roles, never
# a component's (a DiracX token must never act as the dispatcher, an adaptor or a service).
DIRACX_PROPERTY_ROLES: dict[str, list[str]] = {
    "NormalUser": ["user"],
    "ProductionManagement": ["operator"],
    "ServiceAdministrator": ["admin"],
}


class DiracXAuthSettings(BaseSettings):
    """Trust a DiracX installation's access tokens beside dxts's own (`DXTS_AUTH_DIRACX_*`).

    With `url` set, a token whose issuer is that installation is verified with the keys it
    publishes (found through its OpenID configuration) and mapped to a dxts identity: the VO
    from `vo` (one of `vos`), the roles from `dirac_properties` (`property_roles`) and
    `dirac_group` (`group_roles`). The components keep their own tokens from dxts's key.
    """

    model_config = SettingsConfigDict(env_prefix="DXTS_AUTH_DIRACX_", extra="ignore")

    url: str | None = Field(None, description="the DiracX installation's URL (its issuer)")
    vos: list[str] = Field(
        default_factory=list, description="the VOs whose DiracX users may call this dxts"
    )
    audience: str | None = Field(
        None,
        description="the `aud` a token must carry; None: as DiracX 0.7 issues them, with no "
        "`aud` (a token that names an audience is meant for someone else and is refused)",
    )
    keys_refresh_s: float = Field(
        300.0,
        gt=0,
        description="the JWKS is fetched again after this long, and at most this often when "
        "a token names a key it does not hold (key rotation without a restart)",
    )
    property_roles: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DIRACX_PROPERTY_ROLES.items()},
        description="DiracX security property -> the dxts roles it gives",
    )
    group_roles: dict[str, list[str]] = Field(
        default_factory=dict, description="DiracX group -> the dxts roles it gives"
    )


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


# A development token minted for a component's own calls lasts as long as a single machine's
# installation is likely to run without a restart.
DEV_TOKEN_DAYS = 365


class DataDirSettings(BaseSettings):
    """`DXTS_DATA_DIR`: where the development key pair lives when no key is configured."""

    data_dir: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_DATA_DIR", "data_dir"),
        description="where the development token key pair lives when no key is configured",
    )


class ServiceTokenSettings(DataDirSettings):
    """The credentials of a component's own calls to other components: `DXTS_SERVICE_TOKEN`, or
    the file `DXTS_SERVICE_TOKEN_FILE` names (a mounted Secret). With neither, `own_token`
    mints one from the development key pair in `DXTS_DATA_DIR`, on a single machine only."""

    service_token: str | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_SERVICE_TOKEN", "service_token"),
        description="bearer token of the component's own calls",
    )
    service_token_file: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_SERVICE_TOKEN_FILE", "service_token_file"),
        description="file holding that token (read at start-up)",
    )

    def token(self) -> str | None:
        """The configured bearer token (None: none configured)."""
        if self.service_token:
            return self.service_token
        if self.service_token_file is not None:
            return self.service_token_file.read_text().strip()
        return None

    def own_token(self, sub: str, role: str, data_dir: Path | None = None) -> str | None:
        """The configured token, else one for `sub` with `role` in VO `dxts` minted from the
        development key pair in `data_dir` (default: `self.data_dir`; None without one)."""
        token = self.token()
        data_dir = self.data_dir if data_dir is None else data_dir
        if token is None and data_dir is not None:
            from dxts.core.grpc.auth import DevKeys  # only a single machine mints its own

            token = DevKeys.load_or_create(data_dir).issue(
                "dxts", sub, (role,), lifetime=timedelta(days=DEV_TOKEN_DAYS)
            )
        return token
