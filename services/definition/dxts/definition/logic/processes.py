"""The process store and its registry, as the gRPC contract offers them.

Stored processes are content-addressed and shared: identical bodies submitted by two VOs are
one row. Knowing a hash is not what reading it takes: a process is a VO's when a transformation
of that VO runs it, or its registry names it, or either holds for a process containing it; to
anyone else it is NOT_FOUND, as if absent, and lineage leaves out the processes containing it
that are not the caller's. dxts's components (the dispatcher materialising payloads with
`process_tree`) read every process. Names are per VO: a caller publishes, resolves and lists
only its own VO's; lineage lists only the transformations the caller may see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dxts.core.db import Database, Isolation, Transaction
from dxts.core.errors import NotFound, PermissionDenied
from dxts.core.identity import Identity
from dxts.core.ids import hash_to_str
from dxts.definition.logic import registry
from dxts.definition.logic.queries import Viewer
from dxts.definition.store import processes as processes_db
from dxts.definition.store import registry as registry_db
from dxts.definition.store import transformations as transformations_db


@dataclass(frozen=True)
class ProcessView:
    process_id: bytes
    body: Any
    children: tuple[bytes, ...]
    created_at: datetime


@dataclass(frozen=True)
class VersionView:
    vo: str
    name: str
    version: str
    process_id: bytes
    author: str
    created_at: datetime


@dataclass(frozen=True)
class LineageView:
    process_id: bytes
    composes: tuple[bytes, ...]
    composed_by: tuple[bytes, ...]
    versions: tuple[VersionView, ...]
    transformation_ids: tuple[bytes, ...]


async def _views(conn: Transaction, ids: set[bytes]) -> dict[bytes, ProcessView]:
    children: dict[bytes, list[bytes]] = {i: [] for i in ids}
    for parent, child in sorted(await processes_db.process_children(conn, ids)):
        children[parent].append(child)
    return {
        r.process_id: ProcessView(
            r.process_id, r.document, tuple(children[r.process_id]), r.created_at
        )
        for r in await processes_db.process_rows(conn, ids)
    }


@dataclass(frozen=True)
class _Family:
    """A process's lineage, the transformations running it, and which of the process and the
    processes containing it the caller may see."""

    lineage: registry.Lineage
    running: list[transformations_db.TransformationRecord]
    visible: frozenset[bytes]


async def _family(conn: Transaction, viewer: Viewer, process_id: bytes) -> _Family:
    """The process's family; NotFound when the process is absent or not the caller's."""
    found = await registry.lineage(conn, process_id)
    running = {t for t, _ in found.transformations}
    rows = await transformations_db.transformation_rows(conn, ids=running) if running else []
    family = {process_id, *found.composed_by}
    if viewer.all_vos:
        return _Family(found, rows, frozenset(family))
    own = {r.transformation_id for r in rows if viewer.sees(r.vo)}
    used = {p for t, p in found.transformations if t in own}
    used |= await registry_db.named_by(conn, viewer.identity.vo, family)
    visible = _contained(used, found.links)
    if process_id not in visible:
        raise NotFound("process", hash_to_str(process_id))
    return _Family(found, rows, frozenset(visible))


async def owned_by(conn: Transaction, vo: str, process_ids: Iterable[bytes]) -> set[bytes]:
    """Those of `process_ids` that are `vo`'s: what a document of the VO may run by hash (a
    handful per document, each looked up like a read of it)."""
    viewer = Viewer(Identity(vo, ""))
    owned = set()
    for process_id in set(process_ids):
        try:
            await _family(conn, viewer, process_id)
        except NotFound:
            continue
        owned.add(process_id)
    return owned


def _contained(roots: set[bytes], links: frozenset[tuple[bytes, bytes]]) -> set[bytes]:
    """`roots` and every process they contain, following (parent, child) `links`."""
    children: dict[bytes, list[bytes]] = {}
    for parent, child in links:
        children.setdefault(parent, []).append(child)
    reached, frontier = set(roots), list(roots)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in reached:
                reached.add(child)
                frontier.append(child)
    return reached


async def get_process(database: Database, viewer: Viewer, process_id: bytes) -> ProcessView:
    async def work(conn: Transaction) -> ProcessView:
        await _family(conn, viewer, process_id)
        found = await _views(conn, {process_id})
        if process_id not in found:
            raise NotFound("process", hash_to_str(process_id))
        return found[process_id]

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def process_tree(database: Database, viewer: Viewer, root: bytes) -> list[ProcessView]:
    """The root and everything it references, each once, children before their parents (what a
    caller may see of the root it may see of all it contains)."""

    async def work(conn: Transaction) -> list[ProcessView]:
        await _family(conn, viewer, root)
        tree = await registry.process_tree(conn, root)
        views = await _views(conn, set(tree))
        ordered: list[ProcessView] = []
        seen: set[bytes] = set()

        def visit(process_id: bytes) -> None:
            if process_id in seen:
                return
            seen.add(process_id)
            for child in views[process_id].children:
                visit(child)
            ordered.append(views[process_id])

        visit(root)
        return ordered

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


def _own_vo(viewer: Viewer, vo: str) -> str:
    """The VO a registry call is about: the caller's (another VO's names do not exist for it)."""
    return vo or viewer.identity.vo


def _version(vo: str, name: str, entry: registry.RegistryEntry) -> VersionView:
    return VersionView(vo, name, entry.version, entry.process_id, entry.author, entry.created_at)


async def publish(
    database: Database, viewer: Viewer, *, vo: str, name: str, version: str, process_id: bytes
) -> VersionView:
    """Name a stored process of the caller's VO in its registry (author: the caller)."""
    vo = _own_vo(viewer, vo)
    if vo != viewer.identity.vo:
        raise PermissionDenied(f"a process is published in the caller's own VO, not in {vo!r}")
    author = viewer.identity.sub[:64]

    async def work(conn: Transaction) -> VersionView:
        if not await owned_by(conn, vo, [process_id]):  # another VO's is not to be named
            raise NotFound("process", hash_to_str(process_id))
        await registry.publish(
            conn, vo=vo, name=name, version=version, process_id=process_id, author=author
        )
        entry = next(
            e for e in await registry.list_versions(conn, vo=vo, name=name) if e.version == version
        )
        return _version(vo, name, entry)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def resolve(
    database: Database, viewer: Viewer, *, vo: str, name: str, version: str
) -> VersionView:
    vo = _own_vo(viewer, vo)
    if not viewer.sees(vo):
        raise NotFound("process", f"{name}@{version} in {vo}")

    async def work(conn: Transaction) -> VersionView:
        await registry.resolve(conn, vo=vo, name=name, version=version)
        entry = next(
            e for e in await registry.list_versions(conn, vo=vo, name=name) if e.version == version
        )
        return _version(vo, name, entry)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def versions(database: Database, viewer: Viewer, *, vo: str, name: str) -> list[VersionView]:
    """Every version of `name`, oldest first; none for another VO."""
    vo = _own_vo(viewer, vo)
    if not viewer.sees(vo):
        return []

    async def work(conn: Transaction) -> list[VersionView]:
        return [_version(vo, name, e) for e in await registry.list_versions(conn, vo=vo, name=name)]

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def lineage(database: Database, viewer: Viewer, process_id: bytes) -> LineageView:
    async def work(conn: Transaction) -> LineageView:
        family = await _family(conn, viewer, process_id)
        found, rows = family.lineage, family.running
        names = await registry_db.registry_names(conn, viewer.identity.vo, process_id)
        return LineageView(
            process_id,
            found.references,
            tuple(p for p in found.composed_by if p in family.visible),
            tuple(
                VersionView(r.vo, r.name, r.version, r.process_id, r.author, r.created_at)
                for r in names
            ),
            tuple(r.transformation_id for r in rows if viewer.sees(r.vo)),
        )

    return await database.run(work, isolation=Isolation.READ_COMMITTED)
