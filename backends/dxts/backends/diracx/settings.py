"""The DiracX adaptor's settings (`DXTS_DIRACX_*`).

* `url`: the DiracX installation (its REST API is under `<url>/api`).
* Credentials: the adaptor's OWN DiracX identity, never a dxts user's token. `api_key` is a
  DiracX legacy-exchange key (`Authorization: Bearer diracx:legacy:<key>`) traded for an access
  token as `username` in `vo` / `group`; the token is traded again before it expires
  (`refresh_margin_s`).
* `work_dir`: the adaptor's own SQLite state (`state.sqlite`: which parcel became which job).
* `policy`: how a parcel's resolved requirements become JDL attributes (`DiracXPolicy`).
* `payload_command`: what the job runs on the worker node (dxts must be installed there: the
  payload is `dxts.backends.diracx.payload`, which runs the parcel with cwltool through the adaptor
  kit's runner); `payload_environment`: the worker-side settings the job is given (JDL
  `ExecutionEnvironment`), e.g. the storage elements and file catalogue the payload reads its
  `lfn:` inputs from and writes its outputs to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# The Helm chart mounts the adaptor's state volume here.
DEFAULT_WORK_DIR = Path("/var/lib/dxts/diracx")
PAYLOAD_MODULE = "dxts.backends.diracx.payload"


class DiracXPolicy(BaseModel):
    """The installation's backend policy: defaults and bounds for the JDL of every job.

    A parcel's requirements (`cpu_hours`, `memory_gb`, `cores`, `sites`, `banned_sites`,
    `platform`, as the requirement templates and EstimateResourceUsage write them) override the
    defaults; CPU time is normalised (DIRAC's `CPUTime` is in HS06 seconds: hours * 3600 *
    `cpu_power`) and capped at `max_cpu_time`, memory is capped at `max_memory_mb`, and sites are
    kept only if `allowed_sites` (when set) holds them.
    """

    model_config = ConfigDict(extra="forbid")

    cpu_power: float = Field(10.0, gt=0, description="HS06 per core, to normalise CPU hours")
    default_cpu_time: int = Field(86400, ge=1, description="JDL CPUTime when none is required")
    max_cpu_time: int = Field(10**7, ge=1, description="the largest CPUTime ever asked for")
    default_memory_mb: int | None = Field(None, ge=1, description="JDL MaxRAM by default")
    max_memory_mb: int | None = Field(None, ge=1)
    default_cores: int = Field(1, ge=1)
    max_cores: int = Field(64, ge=1)
    sites: list[str] = Field(default_factory=list, description="JDL Site by default")
    allowed_sites: list[str] = Field(default_factory=list, description="empty: any site")
    banned_sites: list[str] = Field(default_factory=list)
    platform: str | None = None
    priority: int = Field(1, ge=0, le=10)
    job_group: str = Field("dxts", min_length=1)


class DiracXSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DXTS_DIRACX_", env_nested_delimiter="__", extra="ignore"
    )

    name: str = Field("diracx", min_length=1, max_length=32)
    kind: Literal["compute"] = Field("compute", description="compute parcels only")
    url: str = Field("http://127.0.0.1:8000", description="the DiracX installation")
    vo: str = Field("dxts", min_length=1)
    group: str = Field("dxts_user", min_length=1)
    username: str = Field("dxts", min_length=1, description="the adaptor's DiracX user")
    api_key: SecretStr = Field(SecretStr(""), description="legacy-exchange key (raw, base64url)")
    refresh_margin_s: float = Field(300.0, ge=0, description="trade the token this long early")
    verify_tls: bool | str = Field(True, description="False, True or a CA bundle path")
    timeout_s: float = Field(60.0, gt=0)
    work_dir: Path = DEFAULT_WORK_DIR
    capacity: int = Field(0, ge=0, description="jobs in flight before Submit refuses; 0: none")
    batch: int = Field(20, ge=1, le=20, description="jobs per DiracX submission (0.7.0: 20)")
    policy: DiracXPolicy = Field(default_factory=DiracXPolicy)
    payload_command: list[str] = Field(
        default_factory=lambda: ["python3", "-m", PAYLOAD_MODULE], min_length=1
    )
    payload_environment: dict[str, str] = Field(default_factory=dict)

    @field_validator("payload_environment")
    @classmethod
    def _jdl_safe(cls, environment: dict[str, str]) -> dict[str, str]:
        """The JDL carries these as strings, which DIRAC's JDL parser cannot read with a quote,
        a backslash, a comma or a semicolon in them."""
        for name, value in environment.items():
            if set('"\\,;') & set(name + value) or "=" in name:
                raise ValueError(f"{name}: no quotes, backslashes, commas, semicolons (or '=')")
        return environment
