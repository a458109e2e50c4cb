"""The local adaptor's settings (`DXTS_LOCAL_*`).

* `work_dir`: its own SQLite state (`state.sqlite`: what it accepted, survives a restart) and one
  directory per parcel (`jobs/<identifier>/`: the materialised process, the input object, the
  runner's log and output; kept as the parcel's output sandbox).
* `storage_root` / `storage_elements`: the local storage elements, one directory each
  (`<storage_root>/<name>/<LFN>`, by default beside the work directory in `se/`); `output_se`
  is where compute outputs are written.
* `workers`: processes run at once; `capacity`: parcels accepted and not finished before Submit
  refuses (0: no limit).
* The file catalogue used to find `lfn:` inputs' replicas (and updated by data requests) is the
  installation's (`DXTS_CATALOGUE_*`, `dxts.core.catalogue`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.backends.runner.settings import replica_path
from dxts.core.states import Kind

# The Helm chart mounts the local backend's storage volume here: work area and storage elements.
DEFAULT_WORK_DIR = Path("/var/lib/dxts/storage/work")


class LocalSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_LOCAL_", extra="ignore")

    name: str = Field("local", min_length=1, max_length=32)
    kind: Kind = Kind.COMPUTE
    work_dir: Path = DEFAULT_WORK_DIR
    storage_root: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_LOCAL_STORAGE_ROOT", "storage_root"),
        description="default: <work_dir>/../se",
    )
    storage_elements: list[str] = Field(default_factory=lambda: ["LOCAL"], min_length=1)
    output_se: str | None = Field(None, description="default: the first storage element")
    workers: int = Field(2, ge=1)
    capacity: int = Field(0, ge=0)
    runner: list[str] = Field(
        # Not `python -m cwltool`, whose exit status is always 0.
        default_factory=lambda: [
            sys.executable,
            "-c",
            "import sys, cwltool.main; sys.exit(cwltool.main.main())",
        ],
        description="the CWL runner command",
    )
    runner_args: list[str] = Field(
        default_factory=lambda: ["--no-container", "--disable-color"],
        description="arguments before the runner's own (outdir, tmpdirs, document, job)",
    )
    kill_grace_s: float = Field(5.0, ge=0, description="SIGTERM to SIGKILL on a cancellation")

    @field_validator("kind", mode="before")
    @classmethod
    def _parse_kind(cls, value: Any) -> Any:
        if isinstance(value, str):
            for member in Kind:
                if member.value.lower() == value.removeprefix("KIND_").lower():
                    return member
        return value

    @model_validator(mode="after")
    def _storage(self) -> LocalSettings:
        if self.storage_root is None:
            self.storage_root = self.work_dir.parent / "se"
        if self.output_se is None:
            self.output_se = self.storage_elements[0]
        if self.output_se not in self.storage_elements:
            raise ValueError(f"output_se {self.output_se!r} is not a storage element")
        return self

    def se_path(self, storage_element: str, lfn: str) -> Path:
        """Where a replica of `lfn` at a local storage element lives."""
        assert self.storage_root is not None
        return replica_path(self.storage_root, storage_element, lfn)
