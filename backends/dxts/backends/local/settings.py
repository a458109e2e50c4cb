"""The local adaptor's settings (`DXTS_LOCAL_*`).

* `work_dir`: its own SQLite state (`state.sqlite`: what it accepted, survives a restart) and one
  directory per parcel (`jobs/<identifier>/`: the materialised process, the input object, the
  runner's log and output; kept as the parcel's output sandbox).
* `storage_root` / `storage_elements`: the local storage elements, one directory each
  (`<storage_root>/<name>/<LFN>`, by default beside the work directory in `se/`); `output_se`
  is where compute outputs are written.
* `workers`: processes run at once; `capacity`: parcels accepted and not finished before Submit
  refuses (0: no limit).
* How a compute parcel's job is confined (docs/security.md, "Jobs in a box";
  `dxts.backends.runner.sandbox`): `sandbox` (`bwrap`: in a bubblewrap sandbox; `none`:
  unconfined, refused when the adaptor runs as root without a job user), `job_user` (the Unix user
  an adaptor running as root starts jobs as: never root), `sandbox_network` (jobs reach the
  network; default not), `sandbox_paths` (more read-only paths jobs see, e.g. site software),
  `default_wall_time_s` (a parcel that asks for none) and `max_wall_time_s` (the installation's
  cap on what a parcel asks).
* `site`: where its parcels run, as a failure names it (`dxts errors` groups by it); by default
  the machine's host name.
* `transfer_timeout_s` / `transfer_parallel`: a data parcel's copies (docs/storage.md): those
  still running at the timeout are killed and fail as timed out; how many run at once.
* `catalogue`: whether the adaptor opens the installation's file catalogue (the chart turns it
  off when the adaptors are given no catalogue credential of their own).
* The file catalogue used to find `lfn:` inputs' replicas (and updated by data requests) is the
  installation's (`DXTS_CATALOGUE_*`, `dxts.core.catalogue`).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from dxts.backends.runner.settings import RunnerEnvironment
from dxts.core.settings import KindSetting
from dxts.core.states import Kind

# The Helm chart mounts the local backend's storage volume here: work area and storage elements.
DEFAULT_WORK_DIR = Path("/var/lib/dxts/storage/work")


class LocalSettings(RunnerEnvironment):
    """The kit's runner environment (storage elements, runner command) and what the local
    adaptor adds: its name and kind, its workers, capacity and cancellation grace."""

    model_config = SettingsConfigDict(env_prefix="DXTS_LOCAL_", extra="ignore")

    name: str = Field("local", min_length=1, max_length=32)
    kind: KindSetting = Kind.COMPUTE
    work_dir: Path = DEFAULT_WORK_DIR
    workers: int = Field(2, ge=1)
    capacity: int = Field(0, ge=0)
    kill_grace_s: float = Field(5.0, ge=0, description="SIGTERM to SIGKILL on a cancellation")
    sandbox: Literal["bwrap", "none"] = "bwrap"
    job_user: str = Field("dxts-job", description="the user jobs run as (when run as root)")
    sandbox_network: bool = False
    sandbox_paths: list[Path] = Field(default_factory=list, description="read-only for jobs")
    site: str = Field(default_factory=socket.gethostname, max_length=128)
    catalogue: bool = Field(True, description="open the file catalogue (false: lfn: inputs fail)")
    transfer_timeout_s: float = Field(
        900, gt=0, description="a data parcel's copies still running then fail as timed out"
    )
    transfer_parallel: int = Field(16, ge=1, description="copies and storage calls at once")
    default_wall_time_s: int = Field(3600, ge=1)
    max_wall_time_s: int = Field(86400, ge=1)
