"""What plugins propose (docs/extensions.md): validated, immutable values the core turns into rows.

Every proposal validates itself when it is built, so a plugin that builds a bad one fails at the
line that built it; the core converts that failure (and any yield of the wrong type) into an
`InvalidArgument` naming the plugin and the field (`invoke`). JSON-valued fields are copied
through the one canonicaliser (`dxts.core.ids.canonical_json`), which both refuses what JSON
cannot carry exactly and decouples the stored value from the plugin's own objects.

An input's identity is computed here, by the core, once: `Input.input_hash` is the XXH3-128 of
the canonical `[lfn, descriptor]` exactly as `dxts.core.ids.input_hash` defines it, so runners
insert it without canonicalising again. An empty descriptor means no descriptor (stored NULL),
so that `{}` and nothing hash alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from datetime import UTC, datetime
from typing import Annotated, Any, TypeAlias
from uuid import UUID

import xxhash
from pydantic import (
    AfterValidator,
    AwareDatetime,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
)
from pydantic import model_validator as _model_validator
from pydantic.dataclasses import dataclass

from dxts.core.errors import InvalidArgument
from dxts.core.ids import canonical_json
from dxts.core.lfn import LFN_MAX, lfn_problem
from dxts.core.states import ActionResult as Result

SE_MAX = 64  # DataParcelDeltas.StorageElement: VARCHAR(64)
MESSAGE_MAX = 512  # Actions.Message: VARCHAR(512); reasons are kept in columns of that size
BIGINT_MAX = 2**63 - 1

_CONFIG = ConfigDict(extra="forbid")


class FieldError(ValueError):
    """A cross-field check failing on one field: carries the field's name for the error path."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__(message)


def _json_copy(value: dict[str, Any]) -> dict[str, Any]:
    if not value:  # the common empty metadata or parameters: nothing to check
        return {}
    try:
        copied: dict[str, Any] = json.loads(canonical_json(value).decode())
    except InvalidArgument as error:
        raise ValueError(error.violations[0].description) from None
    return copied


def _truncate(text: str) -> str:
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 1] + "…"


# A JSON object, validated and deep-copied through the canonicaliser.
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_copy)]
# Human-readable text kept in a VARCHAR(512): longer text is cut, not refused.
Message = Annotated[str, AfterValidator(_truncate)]
Size = Annotated[int, Field(ge=0, le=BIGINT_MAX, strict=True)]
SignedCount = Annotated[int, Field(ge=-BIGINT_MAX, le=BIGINT_MAX, strict=True)]
Requirements = JsonObject


def _unique(values: list[Any], what: str, *, show: bool = True) -> list[Any]:
    if len(set(values)) == len(values):  # the usual case, checked at C speed
        return values
    seen: dict[Any, int] = {}
    for index, value in enumerate(values):
        if value in seen:
            which = f"{value} " if show else ""
            raise ValueError(f"{what}: item {index} {which}repeats item {seen[value]}")
        seen[value] = index
    return values


# ---------------------------------------------------------------------------------- feeder


@dataclass(frozen=True, config=_CONFIG, kw_only=True)
class Input:
    """A new input without a file (a seed, a run, a query): the descriptor is its identity."""

    descriptor: dict[str, Any] | None = None
    _canonical: bytes = field(default=b"", init=False, repr=False, compare=False)

    @_model_validator(mode="after")
    def _identify(self) -> Input:
        lfn: str | None = getattr(self, "lfn", None)
        descriptor = self.descriptor or None
        if lfn is None and descriptor is None:
            raise FieldError("descriptor", "an input without an LFN needs a non-empty descriptor")
        try:
            canonical = canonical_json([lfn, descriptor])
        except InvalidArgument as error:
            raise FieldError("descriptor", error.violations[0].description) from None
        copied = None if descriptor is None else json.loads(canonical.decode())[1]
        object.__setattr__(self, "descriptor", copied)
        object.__setattr__(self, "_canonical", canonical)
        return self

    @property
    def input_hash(self) -> bytes:
        """Inputs.InputHash: XXH3-128 over the canonical `[lfn, descriptor]` (16 bytes)."""
        return xxhash.xxh3_128_digest(self._canonical)


def _normal_lfn(lfn: str) -> str:
    """The one LFN check (`dxts.core.lfn`): every feeder's files pass it."""
    problem = lfn_problem(lfn)
    if problem is not None:
        raise ValueError(problem)
    return lfn


@dataclass(frozen=True, config=_CONFIG, kw_only=True)
class FileInput(Input):
    """A new input on a file; `lfn_size` is the whole file's size whatever a mask selects."""

    lfn: Annotated[str, Field(min_length=1, max_length=LFN_MAX), AfterValidator(_normal_lfn)]
    lfn_size: Size


@dataclass(frozen=True, config=_CONFIG)
class SetFeederState:
    """The feeder's bookmark; commits with the inputs yielded before it."""

    state: JsonObject


@dataclass(frozen=True, config=_CONFIG)
class NoMoreInputs:
    """The feeder is exhausted: the core clears FeederEnabled. No input may follow it."""


# ---------------------------------------------------------------------------------- packer


@dataclass(frozen=True, config=_CONFIG, kw_only=True)
class ComputeParcel:
    """A job over `inputs`; `requirements` merge over the transformation's template."""

    inputs: Annotated[list[UUID], Field(min_length=1)]
    metadata: JsonObject = field(default_factory=dict)
    requirements: Requirements | None = None
    parameters: JsonObject = field(default_factory=dict)

    @field_validator("inputs")
    @classmethod
    def _distinct(cls, inputs: list[UUID]) -> list[UUID]:
        return _unique(inputs, "an input may appear once in a parcel")


@dataclass(frozen=True, config=_CONFIG)
class StorageDelta:
    """What a data parcel costs one storage element: positive adds, negative frees."""

    se: Annotated[str, Field(min_length=1, max_length=SE_MAX)]
    files: SignedCount = 0
    bytes: SignedCount = 0

    @_model_validator(mode="after")
    def _one_direction(self) -> StorageDelta:
        if self.files == 0 and self.bytes == 0:
            raise FieldError("files", "a delta of no files and no bytes says nothing: omit it")
        if self.files * self.bytes < 0:
            raise FieldError(
                "bytes", f"files ({self.files}) and bytes ({self.bytes}) have opposite signs"
            )
        return self


@dataclass(frozen=True, config=_CONFIG, kw_only=True)
class DataParcel:
    """A request to the data backend over `inputs`, with its declared per-SE cost."""

    inputs: Annotated[list[UUID], Field(min_length=1)]
    request: JsonObject
    metadata: JsonObject = field(default_factory=dict)
    deltas: list[StorageDelta] = field(default_factory=list)

    @field_validator("inputs")
    @classmethod
    def _distinct(cls, inputs: list[UUID]) -> list[UUID]:
        return _unique(inputs, "an input may appear once in a parcel")

    @field_validator("deltas")
    @classmethod
    def _one_delta_per_se(cls, deltas: list[StorageDelta]) -> list[StorageDelta]:
        _unique([delta.se for delta in deltas], "one delta per storage element")
        return deltas


@dataclass(frozen=True, config=_CONFIG)
class BadInput:
    """An input the packer cannot use at all: the core moves it to Problematic."""

    input_id: UUID
    reason: Message = "Unknown reason"


@dataclass(frozen=True, config=_CONFIG)
class DelayInput:
    """Withhold inputs from the packer until `delay_until` (timezone-aware; stored in UTC)."""

    input_ids: Annotated[list[UUID], Field(min_length=1)]
    delay_until: AwareDatetime

    @field_validator("input_ids")
    @classmethod
    def _distinct(cls, ids: list[UUID]) -> list[UUID]:
        return _unique(ids, "an input may appear once")

    @field_validator("delay_until")
    @classmethod
    def _utc(cls, when: datetime) -> datetime:
        return when.astimezone(UTC)


# ----------------------------------------------------------------------------------- hooks


# The transformation annotation holding what its hooks asked the core to remember.
HOOK_MEMORY = "hook_memory"


@dataclass(frozen=True, config=_CONFIG, kw_only=True)
class Operation:
    """A change to one transformation. `pause` and `flush` act once; nothing else persists.

    The core validates `feeder_args` against the target's feeder model (and phase) before
    applying it; a workgraph hook returns a dict of target transformation id to Operation.
    `remember` is a hook's memory of the transformation (hooks are stateless, and any replica
    runs the next round): stored whole in its annotations under `HOOK_MEMORY`, where the next
    call sees it.
    """

    feeder_args: JsonObject | None = None
    feeder_enabled: bool | None = Field(default=None, strict=True)
    pause: bool = Field(default=False, strict=True)
    flush: bool = Field(default=False, strict=True)
    remember: JsonObject | None = None


@dataclass(frozen=True, config=_CONFIG)
class Accept:
    """ScoutingToApproving: the scout is done; the workgraph moves to Approving. `reason` says
    why in the workgraph's log ("scout accepted: <reason>"): a scout accepted early because it
    is failing must not read like one that settled."""

    reason: Message = ""


# Every HandleFailedInput decision may carry a `note`: why it was taken (a rule's name, say),
# which the core writes to the transformation's log with the decision.


@dataclass(frozen=True, config=_CONFIG)
class ToUnassigned:
    """HandleFailedInput: pack the input again."""

    note: Message = ""


@dataclass(frozen=True, config=_CONFIG)
class ToProblematic:
    """HandleFailedInput: set the input aside for an operator, saying why."""

    reason: Message
    note: Message = ""


@dataclass(frozen=True, config=_CONFIG)
class RetryWith:
    """HandleFailedInput: pack the input again, its next parcel asking for `requirements` (merged
    over what the packer asks) and/or sent to `backend` (any backend when None)."""

    requirements: Requirements = field(default_factory=dict)
    backend: Annotated[str, Field(min_length=1, max_length=32)] | None = None
    note: Message = ""

    @_model_validator(mode="after")
    def _changes_something(self) -> RetryWith:
        if not self.requirements and self.backend is None:
            raise FieldError("requirements", "RetryWith changes requirements or backend (or both)")
        return self


@dataclass(frozen=True, config=_CONFIG)
class WriteOff:
    """HandleFailedInput: give the input up (NotProcessed, terminal), saying why."""

    reason: Message
    note: Message = ""


def _shape(value: Any) -> str:
    """A child given as a mapping is a FileInput when it names an LFN (error paths say which)."""
    if isinstance(value, FileInput) or (isinstance(value, Mapping) and "lfn" in value):
        return "FileInput"
    return "Input"


_Child = Annotated[
    Annotated[FileInput, Tag("FileInput")] | Annotated[Input, Tag("Input")], Discriminator(_shape)
]


@dataclass(frozen=True, config=_CONFIG)
class SplitInto:
    """HandleFailedInput: replace the input by finer children, shaped as a feeder yields them."""

    children: Annotated[list[_Child], Field(min_length=1)]
    note: Message = ""

    @field_validator("children")
    @classmethod
    def _distinct(cls, children: list[Input]) -> list[Input]:
        _unique([child.input_hash for child in children], "same lfn and descriptor", show=False)
        return children


# --------------------------------------------------------------------------------- actions


@dataclass(frozen=True, config=_CONFIG)
class ActionResult:
    """An action's result; `updated_requirements` (per transformation) apply only on Passed.
    `derivations` says, per transformation, where its updated requirements came from (what was
    measured, over how many parcels); the core records it beside the template it writes."""

    result: Result
    message: Message = ""
    updated_requirements: dict[UUID, Requirements] = field(default_factory=dict)
    derivations: dict[UUID, JsonObject] = field(default_factory=dict)

    @_model_validator(mode="after")
    def _requirements_only_when_passing(self) -> ActionResult:
        if self.updated_requirements and self.result is not Result.PASSED:
            raise FieldError(
                "updated_requirements",
                f"requirements are applied only when the action passes, not on {self.result}",
            )
        unexplained = set(self.derivations) - set(self.updated_requirements)
        if unexplained:
            raise FieldError(
                "derivations",
                f"derivations of {sorted(map(str, unexplained))} without updated requirements",
            )
        return self

    @classmethod
    def passed(cls, message: str = "", **requirements: Any) -> ActionResult:
        return cls(Result.PASSED, message, **requirements)

    @classmethod
    def done(cls, message: str = "") -> ActionResult:
        return cls(Result.DONE, message)

    @classmethod
    def failed(cls, message: str) -> ActionResult:
        return cls(Result.FAILED, message)

    @classmethod
    def pending(cls, message: str = "") -> ActionResult:
        return cls(Result.PENDING, message)


Decision: TypeAlias = ToUnassigned | ToProblematic | SplitInto | RetryWith | WriteOff
FeederProposal: TypeAlias = Input | SetFeederState | NoMoreInputs
PackerProposal: TypeAlias = ComputeParcel | DataParcel | BadInput | DelayInput

# The class names a ValidationError's title can carry when a plugin built a bad proposal.
PROPOSAL_TYPES = frozenset(
    cls.__name__
    for cls in (
        Input,
        FileInput,
        SetFeederState,
        NoMoreInputs,
        ComputeParcel,
        StorageDelta,
        DataParcel,
        BadInput,
        DelayInput,
        Operation,
        Accept,
        ToUnassigned,
        ToProblematic,
        SplitInto,
        RetryWith,
        WriteOff,
        ActionResult,
    )
)
