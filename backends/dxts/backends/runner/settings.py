"""What the runner needs of an adaptor's settings, as protocols (`Storage`, `RunnerSettings`),
so that the runner depends on no particular adaptor; and the kit's settings that keep them:
`StorageElements` (storage only, for an adaptor whose runs happen elsewhere) and
`RunnerEnvironment` (read from the environment: the local adaptor's settings extend it, a
DiracX job's payload reads it on its worker)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from dxts.core.adaptor.failures import DEFAULT_ERROR_PATTERN
from dxts.core.lfn import check_lfn
from dxts.core.storage import StorageEndpoint, parse_endpoints


class Storage(Protocol):
    """The storage elements a run stages its `lfn:` inputs from and writes its outputs to."""

    @property
    def storage_elements(self) -> list[str]: ...

    @property
    def output_se(self) -> str | None: ...

    def se_path(self, storage_element: str, lfn: str) -> Path:
        """Where a replica of `lfn` at one of the storage elements lives."""
        ...


class RunnerSettings(Storage, Protocol):
    """The storage elements, and the CWL runner command with its leading arguments."""

    @property
    def runner(self) -> list[str]: ...

    @property
    def runner_args(self) -> list[str]: ...

    @property
    def error_pattern(self) -> str:
        """What an error line of a tool's stderr matches (the failure's tool message)."""
        ...


def check_output_se(
    output_se: str, storage_elements: list[str], endpoints: dict[str, StorageEndpoint]
) -> None:
    """ValueError unless outputs can be written at `output_se`: a known SE, not a read-only one
    (found when the component starts, not at the first job's stage-out)."""
    if output_se not in [*storage_elements, *endpoints]:
        raise ValueError(f"output_se {output_se!r} is not a storage element")
    if output_se in endpoints and endpoints[output_se].read_only:
        raise ValueError(f"output_se {output_se!r} is read-only: outputs cannot be written there")


def replica_path(storage_root: Path, storage_element: str, lfn: str) -> Path:
    """Where a replica of `lfn` at a storage element under `storage_root` lives
    (`<storage_root>/<storage element>/<LFN>`); InvalidArgument for an LFN not in its normal
    form (`dxts.core.lfn`), so the path never leaves the storage element."""
    return storage_root / storage_element / check_lfn(lfn).lstrip("/")


class StorageElements(BaseModel):
    """A `Storage` of its own, for an adaptor whose runs happen elsewhere (a Slurm node reads it
    from the batch's task table): the root, the elements, the XRootD SEs (kept as their URLs),
    and where outputs go (default: the first element)."""

    model_config = ConfigDict(extra="ignore")

    storage_root: Path
    storage_elements: list[str] = Field(min_length=1)
    output_se: str | None = None
    storage_endpoints: dict[str, StorageEndpoint] = Field(default_factory=dict)

    @field_validator("storage_endpoints", mode="before")
    @classmethod
    def _endpoints(cls, value: Any) -> dict[str, StorageEndpoint]:
        return parse_endpoints(value)

    @field_serializer("storage_endpoints")
    def _urls(self, endpoints: dict[str, StorageEndpoint]) -> dict[str, str]:
        return {endpoint.key: endpoint.base for endpoint in endpoints.values()}

    @model_validator(mode="after")
    def _output_se(self) -> StorageElements:
        if self.output_se is None:
            self.output_se = self.storage_elements[0]
        check_output_se(self.output_se, self.storage_elements, self.storage_endpoints)
        return self

    @classmethod
    def beside(
        cls,
        work_dir: Path,
        storage_root: Path | None,
        storage_elements: list[str],
        output_se: str | None,
        storage_endpoints: dict[str, StorageEndpoint] | None = None,
    ) -> StorageElements:
        """The storage elements of an adaptor working in `work_dir`: by default in `se/`
        beside it."""
        return cls(
            storage_root=storage_root or work_dir.parent / "se",
            storage_elements=storage_elements,
            output_se=output_se,
            storage_endpoints=storage_endpoints or {},
        )

    def se_path(self, storage_element: str, lfn: str) -> Path:
        return replica_path(self.storage_root, storage_element, lfn)


class RunnerEnvironment(BaseSettings):
    """A `RunnerSettings` read from the environment (`DXTS_LOCAL_*`, the names the local
    adaptor and every worker a compute parcel runs on have always read): the run's work
    directory, the storage elements (by default in `se/` beside the work directory; outputs
    go to the first unless `output_se` says otherwise), and the CWL runner command."""

    model_config = SettingsConfigDict(env_prefix="DXTS_LOCAL_", extra="ignore")

    work_dir: Path
    storage_root: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_LOCAL_STORAGE_ROOT", "storage_root"),
        description="default: <work_dir>/../se",
    )
    storage_elements: list[str] = Field(default_factory=lambda: ["LOCAL"], min_length=1)
    output_se: str | None = Field(None, description="default: the first storage element")
    # The installation's XRootD SEs (dxts.core.storage), under the installation-wide name.
    storage_endpoints: Annotated[dict[str, StorageEndpoint], NoDecode] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("DXTS_STORAGE_ENDPOINTS", "storage_endpoints"),
        description="SE name -> root://host:port//prefix (dxts.core.storage)",
    )
    runner: list[str] = Field(
        # cwltool keeping the tools' stderr apart from its log (not `python -m cwltool`, whose
        # exit status is always 0).
        default_factory=lambda: [sys.executable, "-m", "dxts.backends.runner.cwltool_main"],
        description="the CWL runner command",
    )
    error_pattern: str = Field(
        DEFAULT_ERROR_PATTERN,
        description="a regular expression: the last stderr line of a failed tool matching it "
        "(or a Python traceback's last line) is the failure's message",
    )
    runner_args: list[str] = Field(
        default_factory=lambda: ["--no-container", "--disable-color"],
        description="arguments before the runner's own (outdir, tmpdirs, document, job)",
    )

    @field_validator("storage_endpoints", mode="before")
    @classmethod
    def _endpoints(cls, value: Any) -> dict[str, StorageEndpoint]:
        return parse_endpoints(value)

    @field_validator("error_pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(
                f"error_pattern {pattern!r} is not a regular expression: {error}"
            ) from None
        return pattern

    @model_validator(mode="after")
    def _storage(self) -> RunnerEnvironment:
        if self.storage_root is None:
            self.storage_root = self.work_dir.parent / "se"
        if self.output_se is None:
            self.output_se = self.storage_elements[0]
        check_output_se(self.output_se, self.storage_elements, self.storage_endpoints)
        return self

    def se_path(self, storage_element: str, lfn: str) -> Path:
        """Where a replica of `lfn` at one of the storage elements lives."""
        assert self.storage_root is not None
        return replica_path(self.storage_root, storage_element, lfn)
