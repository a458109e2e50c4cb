"""What the runner needs of an adaptor's settings, as protocols: the local adaptor's settings
(`dxts.backends.local.settings.LocalSettings`) are one, and any adaptor's own may be another,
so that the runner depends on no particular adaptor."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator


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


def replica_path(storage_root: Path, storage_element: str, lfn: str) -> Path:
    """Where a replica of `lfn` at a storage element under `storage_root` lives
    (`<storage_root>/<storage element>/<LFN>`)."""
    relative = lfn.lstrip("/")
    if not relative or ".." in Path(relative).parts:
        raise ValueError(f"{lfn!r} is not a usable LFN")
    return storage_root / storage_element / relative


class StorageElements(BaseModel):
    """A `Storage` of its own, for an adaptor whose runs happen elsewhere (a Slurm node reads it
    from the batch's task table): the root, the elements, and where outputs go (default: the
    first element)."""

    model_config = ConfigDict(extra="ignore")

    storage_root: Path
    storage_elements: list[str] = Field(min_length=1)
    output_se: str | None = None

    @model_validator(mode="after")
    def _output_se(self) -> StorageElements:
        if self.output_se is None:
            self.output_se = self.storage_elements[0]
        if self.output_se not in self.storage_elements:
            raise ValueError(f"output_se {self.output_se!r} is not a storage element")
        return self

    @classmethod
    def beside(
        cls,
        work_dir: Path,
        storage_root: Path | None,
        storage_elements: list[str],
        output_se: str | None,
    ) -> StorageElements:
        """The storage elements of an adaptor working in `work_dir`: by default in `se/`
        beside it."""
        return cls(
            storage_root=storage_root or work_dir.parent / "se",
            storage_elements=storage_elements,
            output_se=output_se,
        )

    def se_path(self, storage_element: str, lfn: str) -> Path:
        return replica_path(self.storage_root, storage_element, lfn)
