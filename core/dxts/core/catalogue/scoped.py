"""The catalogue as one VO sees it: its own files, and the shared prefixes read-only.

Files belong to the VO whose namespace holds their LFN (`dxts.core.lfn.FileNamespace`). A
`ScopedCatalogue` wraps the installation's catalogue (any implementation) and applies a
`FileScope`: queries return only files under the scope's prefixes, lookups treat other LFNs as
absent, and registering or removing anything outside the VO's own namespace is refused
(PermissionDenied, one line naming the file and whose it is). A scope that only reads may read
the shared prefixes too; a scope that writes (a data member: replicating registers replicas,
removing forgets files) sees only the VO's own files, so nothing it is fed can be another's.

The scope is given when the wrapper is made (`dxts file`), or set for a block of work with
`files_of(scope)` (the feeder runner, for the transformation it feeds): the wrapper the
plugins are injected with reads the block's scope, and with none set passes through (dxts's
own components acting for themselves).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from dxts.core.catalogue.interface import CatalogueFile, CataloguePage, FileCatalogue, Registered
from dxts.core.errors import PermissionDenied
from dxts.core.lfn import FileNamespace


@dataclass(frozen=True)
class FileScope:
    """Whose files a piece of work may use: VO `vo`'s, read only or read and write."""

    vo: str
    namespace: FileNamespace
    write: bool = False

    @property
    def prefixes(self) -> list[str]:
        return self.namespace.writable(self.vo) if self.write else self.namespace.readable(self.vo)

    def visible(self, lfns: Iterable[str]) -> list[str]:
        return [lfn for lfn in lfns if lfn.startswith(tuple(self.prefixes))]

    def refusal(self, lfns: Sequence[str], *, write: bool | None = None) -> str | None:
        """One line on the first of `lfns` this scope may not use, None when it may use all."""
        return self.namespace.refusal(self.vo, lfns, write=self.write if write is None else write)

    def require_writable(self, lfns: Sequence[str]) -> None:
        problem = self.refusal(lfns, write=True)
        if problem is not None:
            raise PermissionDenied(problem)


_current_scope: ContextVar[FileScope | None] = ContextVar("dxts_file_scope", default=None)


@contextlib.contextmanager
def files_of(scope: FileScope) -> Iterator[FileScope]:
    """Run a block as `scope`: every ScopedCatalogue without a scope of its own applies it."""
    token = _current_scope.set(scope)
    try:
        yield scope
    finally:
        _current_scope.reset(token)


def narrowed(within: Sequence[str] | None, prefixes: Sequence[str]) -> list[str]:
    """The prefixes inside both `within` (None: everything) and `prefixes`."""
    if within is None:
        return list(prefixes)
    return list(
        dict.fromkeys(
            inner if inner.startswith(outer) else outer
            for inner in within
            for outer in prefixes
            if inner.startswith(outer) or outer.startswith(inner)
        )
    )


class ScopedCatalogue(FileCatalogue):
    """`inner` seen through a FileScope: the one given, else the block's (`files_of`), else
    none (everything, as `inner`). Starting and closing are the owner of `inner`'s business."""

    def __init__(self, inner: FileCatalogue, scope: FileScope | None = None) -> None:
        self.inner = inner
        self.scope = scope

    def _scope(self) -> FileScope | None:
        return self.scope or _current_scope.get()

    async def start(self) -> None:
        """Nothing: the wrapped catalogue is started by whoever made it."""

    async def close(self) -> None:
        """Nothing: the wrapped catalogue is closed by whoever made it."""

    async def register(self, files: Iterable[CatalogueFile | Mapping[str, Any]]) -> Registered:
        batch = list(files)
        scope = self._scope()
        if scope is not None:
            lfns = [f.lfn if isinstance(f, CatalogueFile) else str(f.get("lfn")) for f in batch]
            scope.require_writable(lfns)
        return await self.inner.register(batch)  # type: ignore[arg-type]

    async def query(
        self,
        where: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = 1000,
        with_replicas: bool = False,
        within: Sequence[str] | None = None,
    ) -> CataloguePage:
        scope = self._scope()
        if scope is not None:
            within = narrowed(within, scope.prefixes)
        return await self.inner.query(
            where, after=after, limit=limit, with_replicas=with_replicas, within=within
        )

    async def files(self, lfns: Iterable[str]) -> dict[str, CatalogueFile]:
        return await self.inner.files(self._visible(lfns))

    async def replicas(self, lfns: Iterable[str]) -> dict[str, tuple[str, ...]]:
        return await self.inner.replicas(self._visible(lfns))

    async def remove_replicas(self, replicas: Mapping[str, Iterable[str]]) -> int:
        scope = self._scope()
        if scope is not None:
            scope.require_writable(list(replicas))
        return await self.inner.remove_replicas(replicas)

    async def remove_files(self, lfns: Iterable[str]) -> int:
        wanted = list(lfns)
        scope = self._scope()
        if scope is not None:
            scope.require_writable(wanted)
        return await self.inner.remove_files(wanted)

    def _visible(self, lfns: Iterable[str]) -> Iterable[str]:
        scope = self._scope()
        if scope is None or isinstance(lfns, str):  # a lone string: the catalogue refuses it
            return lfns
        return scope.visible(lfns)
