"""The Slurm adaptor's settings (`DXTS_SLURM_*`).

* `work_dir`: on storage every node shares — one directory per Submit batch (`batches/<id>/`:
  the materialised process, the job script, Slurm's per-task log) and one per parcel
  (`jobs/<identifier>/`: its input object, the runner's log and output, `result.json`), kept as
  the parcel's sandbox; the adaptor's own SQLite state (`state.sqlite`) lives there too.
* `storage_root` / `storage_elements` / `output_se`: the storage elements, one directory each
  on the shared filesystem (as the local adaptor's; by default `<work_dir>/../se`); the
  installation's XRootD SEs (`DXTS_STORAGE_ENDPOINTS`, docs/storage.md): `lfn:` inputs only
  they hold are fetched into the parcel's directory before its job is submitted, and a job
  whose `output_se` is one uploads its outputs there from its node.
* The resource request of a parcel (`dxts.backends.slurm.logic.resources`): its requirements
  (`cores`, `memory_mb`, `wall_time_s`, `partition`), else its CWL ResourceRequirement, else
  `default_cores` / `default_memory_mb` / `default_wall_time_s`; the partition is the
  installation's policy (`partition`, empty: the cluster's default); a parcel may name only
  `partition` or one of `allowed_partitions`, and is refused otherwise.
* `array_size`: the most parcels one `sbatch --array` carries (a Submit of more makes several).
* `python`: the interpreter a job runs `dxts.backends.slurm.job` with (it must see the same
  dxts on the nodes: by default this one's, right for a shared installation).
* `catalogue`: whether the adaptor opens the installation's file catalogue (the chart turns it
  off when the adaptors are given no catalogue credential of their own).
* `job_user`: the unprivileged account an adaptor running as root submits jobs as (sbatch
  `--uid`/`--gid`; default `dxts-job`, which `scripts/job-sandbox` creates); its batch and job
  directories are then the account's and closed to everyone else (0700, files 0600). Empty:
  the adaptor's own user (a development machine whose Python only root can run; a warning).
* `commands_dir`: where sbatch, sacct, squeue and scancel are (empty: PATH); the cluster is the
  one SLURM_CONF (or the default configuration) names.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from dxts.backends.runner.settings import StorageElements
from dxts.core.adaptor.failures import DEFAULT_ERROR_PATTERN
from dxts.core.storage import StorageEndpoint, parse_endpoints

DEFAULT_WORK_DIR = Path("/var/lib/dxts/storage/slurm")


class SlurmSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_SLURM_", extra="ignore")

    name: str = Field("slurm", min_length=1, max_length=32)
    kind: Literal["compute"] = Field("compute", description="it runs compute parcels only")
    work_dir: Path = DEFAULT_WORK_DIR
    storage_root: Path | None = Field(None, description="default: <work_dir>/../se")
    storage_elements: list[str] = Field(default_factory=lambda: ["LOCAL"], min_length=1)
    output_se: str | None = Field(None, description="default: the first storage element")
    storage_endpoints: Annotated[dict[str, StorageEndpoint], NoDecode] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("DXTS_STORAGE_ENDPOINTS", "storage_endpoints"),
        description="SE name -> root://host:port//prefix (dxts.core.storage)",
    )
    partition: str = ""
    allowed_partitions: list[str] = Field(
        default_factory=list,
        description="the partitions a parcel may name besides `partition` (a parcel naming "
        "another is refused: the installation's policy, enforced again here)",
    )
    default_cores: int = Field(1, ge=1)
    default_memory_mb: int = Field(512, ge=1)
    default_wall_time_s: int = Field(3600, ge=60)
    array_size: int = Field(1000, ge=1)
    capacity: int = Field(0, ge=0)
    python: str = sys.executable
    runner_args: list[str] = Field(
        default_factory=lambda: ["--no-container", "--disable-color"],
        description="cwltool's arguments before its own (outdir, tmpdirs, document, job)",
    )
    error_pattern: str = Field(
        DEFAULT_ERROR_PATTERN,
        description="the last stderr line of a failed tool matching it is the failure's message",
    )
    catalogue: bool = Field(True, description="open the file catalogue (false: lfn: inputs fail)")
    job_user: str = Field("dxts-job", description="the account jobs run as (adaptor as root)")
    commands_dir: str = ""
    command_timeout_s: float = Field(60.0, gt=0)
    lost_after_s: float = Field(
        120.0, gt=0, description="a submitted job neither squeue nor sacct knows for so long"
    )

    @field_validator("storage_endpoints", mode="before")
    @classmethod
    def _endpoints(cls, value: Any) -> dict[str, StorageEndpoint]:
        return parse_endpoints(value)

    @model_validator(mode="after")
    def _storage(self) -> SlurmSettings:
        """The storage elements follow the local adaptor's rules (defaults and checks)."""
        try:
            resolved = self.storage()
        except ValidationError as error:
            raise ValueError(error.errors()[0]["msg"].removeprefix("Value error, ")) from None
        self.storage_root, self.output_se = resolved.storage_root, resolved.output_se
        return self

    def storage(self) -> StorageElements:
        """The storage elements as the runner's staging and output code reads them."""
        return StorageElements.beside(
            self.work_dir,
            self.storage_root,
            self.storage_elements,
            self.output_se,
            self.storage_endpoints,
        )
