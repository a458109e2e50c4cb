"""LFNs: the one check every entry applies, and the VO namespaces files live under.

`check_lfn` is called wherever an LFN enters dxts — documents (a List feeder's items), every
feeder's proposals, `dxts file put`/`get`, catalogue registration and lookups, the data adaptors
and the runner's staging — so that one name always means one file. It normalises by refusing:
an LFN is accepted only in its one normal form (absolute, no empty, `.` or `..` segment, no
trailing `/`, no control character, at most LFN_MAX characters), so `/./A` and `//A` are errors
rather than silent aliases of `/A`, and a path built from an LFN never leaves its storage element.

`FileNamespace` says which VO a file belongs to: its LFN's place under the installation's
namespace template (`DXTS_FILES_NAMESPACE`, default `/{vo}/`, as grid catalogues do: VO `lhcb`
owns `/lhcb/...`). A VO reads its own files and those under the prefixes the operator shares
(`DXTS_FILES_SHARED`, read-only for every VO); it writes (registers, replicates, removes) only
its own. An LFN under no VO's namespace belongs to none: only dxts's own components and
operators' tools reach it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.errors import InvalidArgument

LFN_MAX = 512  # Inputs.LFN, ParcelOutputs.LFN and CatalogueFiles.LFN are VARCHAR(512)
VO_MARK = "{vo}"


def lfn_problem(lfn: object) -> str | None:
    """Why `lfn` is not an LFN in its normal form (None when it is)."""
    if not isinstance(lfn, str):
        return f"an LFN is a string, got {type(lfn).__name__}"
    if not lfn.startswith("/"):
        return "an LFN is absolute (starts with /)"
    if len(lfn) > LFN_MAX:
        return f"an LFN is at most {LFN_MAX} characters, this one has {len(lfn)}"
    if any(unicodedata.category(char) == "Cc" for char in lfn):
        return "an LFN holds no control character (NUL, newline, tab...)"
    segments = lfn[1:].split("/")
    if "" in segments:
        return "an LFN has no empty segment (no //, no trailing /)"
    if "." in segments or ".." in segments:
        return "an LFN has no . or .. segment"
    return None


def check_lfn(lfn: object, *, field: str = "lfn") -> str:
    """`lfn` itself when it is an LFN in its normal form; else InvalidArgument, one line naming
    the LFN (escaped) and what is wrong with it."""
    problem = lfn_problem(lfn)
    if problem is not None:
        raise InvalidArgument(f"{_shown(lfn)} is refused: {problem}", field=field)
    assert isinstance(lfn, str)
    return lfn


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


class FileNamespace(BaseSettings):
    """Which VO owns which LFNs, and what a VO shares (`DXTS_FILES_*`)."""

    model_config = SettingsConfigDict(env_prefix="DXTS_FILES_", extra="ignore")

    namespace: str = Field(
        "/{vo}/", description="where a VO's files live: an LFN prefix holding {vo} once"
    )
    shared: list[str] = Field(
        default_factory=list,
        description="LFN prefixes every VO may read (never write), e.g. /lhcb/shared/",
    )

    @field_validator("namespace")
    @classmethod
    def _one_vo_segment(cls, template: str) -> str:
        if not re.fullmatch(r"(/[^/{}]+)*/\{vo\}/", template):
            raise ValueError("a namespace is /{vo}/ or /prefix/.../{vo}/")
        return template

    @field_validator("shared")
    @classmethod
    def _prefixes(cls, prefixes: list[str]) -> list[str]:
        for prefix in prefixes:
            if not prefix.endswith("/") or lfn_problem(prefix.rstrip("/")) is not None:
                raise ValueError(f"{prefix!r}: a shared prefix is an absolute path ending in /")
        return prefixes

    def home(self, vo: str) -> str:
        """The prefix of the VO's own files (`/lhcb/`)."""
        return self.namespace.replace(VO_MARK, vo)

    def owner(self, lfn: str) -> str | None:
        """The VO whose namespace holds `lfn`; None when it is under none."""
        before, after = self.namespace.split(VO_MARK)
        if not lfn.startswith(before):
            return None
        vo, slash, _ = lfn[len(before) :].partition(after)
        return vo if slash and vo and "/" not in vo else None

    def readable(self, vo: str) -> list[str]:
        """The prefixes of what the VO may read: its home, then the shared ones."""
        return [self.home(vo), *self.shared]

    def writable(self, vo: str) -> list[str]:
        return [self.home(vo)]

    def refusal(self, vo: str, lfns: Sequence[str], *, write: bool) -> str | None:
        """One line saying which of `lfns` VO `vo` may not read (or, with `write`, change);
        None when it may use them all."""
        prefixes = self.writable(vo) if write else self.readable(vo)
        foreign = [lfn for lfn in lfns if not lfn.startswith(tuple(prefixes))]
        if not foreign:
            return None
        first = foreign[0]
        owner = self.owner(first)
        whose = f"VO {owner}'s file" if owner else "a file of no VO"
        verb = "change or remove" if write else "read"
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        return (
            f"{first} is {whose}: VO {vo} may {verb} only files under {', '.join(prefixes)}{more}"
        )
