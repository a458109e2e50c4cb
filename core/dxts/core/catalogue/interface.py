"""The file catalogue as dxts sees it: a small interface, a query vocabulary, an exact watermark.

Feeders query it and the outcome recorder registers outputs in it; both receive it by injection
(annotate a parameter with `FileCatalogue`). dxts ships `LocalFileCatalogue`; an installation
plugs in its own (DIRAC File Catalog, Rucio) under the entry-point group `dxts.catalogues`: the
entry point is a callable taking `CatalogueSettings` and returning an unstarted FileCatalogue,
selected by `DXTS_CATALOGUE_IMPLEMENTATION`.

Metadata is a JSON object per file. Its scalar values can be queried, each key by one
condition, all conditions ANDed:

* a scalar — equality: `{"configName": "LHCb"}`;
* a list — membership: `{"run": [285000, 285001]}`;
* a range, inclusive, either bound optional — `{"run": {"min": 285000, "max": 286500}}`.

Numbers compare as numbers (an int bound matches int and float values; booleans are 0 and 1),
strings as strings, case-sensitively. Lists, objects and nulls are kept but cannot be queried.

A query pages through the matching files in registration order and returns, with each page, an
opaque watermark: passing it back as `after` continues exactly after that page. What counts as
"after" is an implementation's promise; the local catalogue's is exact (see `local`).
"""

from __future__ import annotations

import abc
import importlib.metadata
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.catalogue.schema import CHECKSUM_MAX, KEY_MAX, SE_MAX, STRING_VALUE_MAX
from dxts.core.errors import FieldViolation, InvalidArgument, Unavailable
from dxts.core.ids import canonical_json
from dxts.core.lfn import LFN_MAX, lfn_problem

ENTRY_POINT_GROUP = "dxts.catalogues"
BIGINT = 2**63 - 1

MetaKey = Annotated[str, Field(min_length=1, max_length=KEY_MAX)]


class CatalogueSettings(BaseSettings):
    """Which catalogue a process uses and, for the local one, where its database is."""

    model_config = SettingsConfigDict(env_prefix="DXTS_CATALOGUE_", extra="ignore")

    implementation: str = Field("local", description="entry point name in dxts.catalogues")
    url: str = Field(
        "sqlite+aiosqlite:///dxts-catalogue.sqlite",
        description="SQLAlchemy async URL of the local catalogue's own database",
    )


class CatalogueFile(BaseModel):
    """A file: its LFN, size, checksum, metadata, and the storage elements holding a replica."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lfn: Annotated[str, Field(min_length=1, max_length=LFN_MAX)]
    size: Annotated[int, Field(ge=0, le=BIGINT, strict=True)]
    checksum: Annotated[str, Field(min_length=1, max_length=CHECKSUM_MAX)] | None = None
    metadata: dict[MetaKey, Any] = Field(default_factory=dict)
    replicas: tuple[Annotated[str, Field(min_length=1, max_length=SE_MAX)], ...] = ()

    @field_validator("metadata")
    @classmethod
    def _storable(cls, metadata: dict[str, Any]) -> dict[str, Any]:
        try:
            canonical_json(metadata)  # refuses what JSON cannot carry exactly
        except InvalidArgument as error:
            raise ValueError(error.violations[0].description) from None
        for key, value in metadata.items():
            if isinstance(value, str) and len(value) > STRING_VALUE_MAX:
                raise ValueError(f"{key}: a string value is at most {STRING_VALUE_MAX} characters")
            if isinstance(value, int) and not -BIGINT <= value <= BIGINT:
                raise ValueError(f"{key}: {value} is outside the 64-bit range")
        return metadata

    @field_validator("lfn")
    @classmethod
    def _normal(cls, lfn: str) -> str:
        problem = lfn_problem(lfn)
        if problem is not None:
            raise ValueError(problem)
        return lfn

    @field_validator("replicas")
    @classmethod
    def _distinct(cls, replicas: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(replicas))

    def same_file(self, other: CatalogueFile) -> bool:
        """Same content as recorded (replicas aside): what makes a re-registration a no-op."""
        return (self.lfn, self.size, self.checksum, self.metadata) == (
            other.lfn,
            other.size,
            other.checksum,
            other.metadata,
        )


class Range(BaseModel):
    """An inclusive range; a missing bound is open. Both bounds numbers, or both strings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: StrictInt | StrictFloat | StrictStr | None = None
    max: StrictInt | StrictFloat | StrictStr | None = None

    @model_validator(mode="after")
    def _bounded(self) -> Range:
        bounds = [b for b in (self.min, self.max) if b is not None]
        if not bounds:
            raise ValueError("a range needs min, max or both")
        if len({isinstance(b, str) for b in bounds}) > 1:
            raise ValueError("both bounds are numbers or both are strings")
        if any(isinstance(b, float) and not math.isfinite(b) for b in bounds):
            raise ValueError("bounds are finite")
        if len(bounds) == 2 and bounds[0] > bounds[1]:  # type: ignore[operator]
            raise ValueError(f"min {self.min!r} is above max {self.max!r}")
        return self


Condition = bool | int | float | str | list[bool | int | float | str] | Range


def parse_where(where: Mapping[str, Any] | None, *, field: str = "where") -> dict[str, Condition]:
    """Validate a metadata query; InvalidArgument naming each bad condition by its path."""
    if where is not None and not isinstance(where, Mapping):
        raise InvalidArgument(f"a query is an object, got {type(where).__name__}", field=field)
    parsed: dict[str, Condition] = {}
    problems = []
    for key, condition in (where or {}).items():
        path = f"{field}.{key}"
        if not isinstance(key, str) or not 0 < len(key) <= KEY_MAX:
            problems.append(FieldViolation(path, f"a metadata key is 1-{KEY_MAX} characters"))
        elif isinstance(condition, Range | Mapping):
            try:
                parsed[key] = Range.model_validate(condition)
            except ValidationError as error:
                problems.extend(
                    FieldViolation(".".join([path, *map(str, e["loc"])]), e["msg"])
                    for e in error.errors(include_url=False)
                )
        elif isinstance(condition, list):
            if not condition or not all(_is_scalar(value) for value in condition):
                problems.append(FieldViolation(path, "a list condition is non-empty scalars"))
            parsed[key] = condition
        elif _is_scalar(condition):
            parsed[key] = condition
        else:
            problems.append(
                FieldViolation(path, "a condition is a value, a list of values or {min, max}")
            )
    if problems:
        raise InvalidArgument(problems)
    return parsed


def _is_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, bool | int | str)


@dataclass(frozen=True)
class CataloguePage:
    """One page of a query: its files in registration order, and where the next page starts."""

    files: list[CatalogueFile]
    watermark: str
    more: bool  # the query had more matches than the page held when it ran


@dataclass(frozen=True)
class Registered:
    """What a registration changed: files new to the catalogue, replicas new to it."""

    files: int
    replicas: int


class FileCatalogue(abc.ABC):
    """The catalogue interface dxts depends on. All methods are bulk; all are idempotent."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect (and, for the local catalogue, create its tables if absent)."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def register(self, files: Iterable[CatalogueFile]) -> Registered:
        """Register files with their replicas, all or nothing. A file already registered with
        the same size, checksum and metadata gains any new replicas; one registered with other
        content is refused (FailedPrecondition naming it), since an LFN names one content."""

    @abc.abstractmethod
    async def query(
        self,
        where: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = 1000,
        with_replicas: bool = False,
        within: Sequence[str] | None = None,
    ) -> CataloguePage:
        """Up to `limit` files matching `where`, registered after watermark `after` (None:
        from the beginning), in registration order; with `within`, only files whose LFN starts
        with one of those prefixes (a VO's view: `dxts.core.catalogue.scoped`)."""

    @abc.abstractmethod
    async def files(self, lfns: Iterable[str]) -> dict[str, CatalogueFile]:
        """The registered files among `lfns`, with their replicas; absent LFNs are left out."""

    @abc.abstractmethod
    async def replicas(self, lfns: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """Storage elements holding each registered LFN (possibly none)."""

    @abc.abstractmethod
    async def remove_replicas(self, replicas: Mapping[str, Iterable[str]]) -> int:
        """Forget the given replicas (LFN → storage elements); returns how many were removed.
        A file whose last replica goes stays registered, with none."""

    @abc.abstractmethod
    async def remove_files(self, lfns: Iterable[str]) -> int:
        """Forget files with their metadata and replicas; returns how many were removed."""


def load_catalogue(settings: CatalogueSettings | None = None) -> FileCatalogue:
    """The catalogue this installation configures (unstarted): the `dxts.catalogues` entry
    point named by `settings.implementation`, called with the settings."""
    settings = settings or CatalogueSettings()
    found = {
        (ep.value, ep.dist.name if ep.dist else None): ep
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        if ep.name == settings.implementation
    }
    if not found:
        names = sorted({ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)})
        raise Unavailable(
            f"no file catalogue {settings.implementation!r} is installed "
            f"(installed: {', '.join(names) or 'none'})"
        )
    if len(found) > 1:
        providers = " and ".join(f"{dist} ({value})" for value, dist in sorted(found, key=str))
        raise Unavailable(
            f"file catalogue {settings.implementation!r} is registered twice: by {providers}"
        )
    (entry_point,) = found.values()
    catalogue = entry_point.load()(settings)
    if not isinstance(catalogue, FileCatalogue):
        raise Unavailable(f"{entry_point.value} did not make a FileCatalogue")
    return catalogue


async def open_catalogue(settings: CatalogueSettings | None = None) -> FileCatalogue:
    """The configured catalogue, started: what a service registers as the FileCatalogue
    provider (`providers.add(FileCatalogue, await open_catalogue())`)."""
    catalogue = load_catalogue(settings)
    await catalogue.start()
    return catalogue
