"""The process registry (VO-scoped names for stored processes) and process lineage.

The registry is a lookup, never an identity: a name resolves to a hash once, at submission, and
nothing done here afterwards changes what a transformation runs. A published name@version is
never repointed; publishing the same hash again under it is a no-op (a retried call), any other
hash is AlreadyExists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from dxts.core.db import Transaction
from dxts.core.errors import AlreadyExists, FieldViolation, InvalidArgument, NotFound
from dxts.core.ids import hash_to_str
from dxts.definition.store import processes as processes_db
from dxts.definition.store import registry as registry_db

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")


@dataclass(frozen=True)
class RegistryEntry:
    version: str
    process_id: bytes
    author: str
    created_at: datetime


@dataclass(frozen=True)
class Lineage:
    process_id: bytes
    references: tuple[bytes, ...]  # what it runs directly
    composed_by: tuple[bytes, ...]  # every stored process containing it, transitively
    transformations: tuple[tuple[bytes, bytes], ...]  # (TransformationID, the ProcessID it runs)
    links: frozenset[tuple[bytes, bytes]] = frozenset()  # (parent, child) among composed_by


def _check_name(name: str, version: str) -> None:
    problems = []
    if not isinstance(name, str) or not NAME.match(name):
        problems.append(
            FieldViolation("name", "1 to 128 of A-Z a-z 0-9 . _ / -, starting alphanumeric")
        )
    if not isinstance(version, str) or not VERSION.match(version):
        problems.append(
            FieldViolation("version", "1 to 64 of A-Z a-z 0-9 . _ + -, starting alphanumeric")
        )
    if problems:
        raise InvalidArgument(problems)


async def publish(
    conn: Transaction, *, vo: str, name: str, version: str, process_id: bytes, author: str
) -> None:
    """Name a stored process `name@version` in `vo`."""
    _check_name(name, version)
    if not await processes_db.existing_processes(conn, [process_id]):
        raise NotFound("process", hash_to_str(process_id))
    taken = await registry_db.registry_lookup(conn, vo, [(name, version)])
    if (name, version) in taken:
        if taken[(name, version)] == process_id:
            return
        raise AlreadyExists(
            f"{name}@{version} is already published in {vo} as "
            f"{hash_to_str(taken[(name, version)])}; publish a new version"
        )
    await registry_db.insert_registry_entry(
        conn, vo=vo, name=name, version=version, process_id=process_id, author=author
    )


async def resolve(conn: Transaction, *, vo: str, name: str, version: str) -> bytes:
    found = await registry_db.registry_lookup(conn, vo, [(name, version)])
    if (name, version) not in found:
        raise NotFound("process", f"{name}@{version} in {vo}")
    return found[(name, version)]


async def list_versions(conn: Transaction, *, vo: str, name: str) -> list[RegistryEntry]:
    """Every published version of `name`, oldest first (versions are not otherwise ordered)."""
    return [
        RegistryEntry(row.version, row.process_id, row.author, row.created_at)
        for row in await registry_db.registry_versions(conn, vo, name)
    ]


async def process_tree(conn: Transaction, root: bytes) -> dict[bytes, dict]:
    """A stored process and everything it references, keyed by hash (payload materialisation)."""
    tree: dict[bytes, dict] = {}
    frontier = {root}
    while frontier:
        bodies = await processes_db.get_processes(conn, frontier)
        missing = frontier - bodies.keys()
        if missing:
            raise NotFound("process", hash_to_str(sorted(missing)[0]))
        tree.update(bodies)
        children = await processes_db.process_children(conn, frontier)
        frontier = {child for _, child in children} - tree.keys()
    return tree


async def lineage(conn: Transaction, process_id: bytes) -> Lineage:
    """What X runs, what composes X (walking ProcessReferences upwards, one query per level),
    and which transformations run X or anything containing it."""
    if not await processes_db.existing_processes(conn, [process_id]):
        raise NotFound("process", hash_to_str(process_id))
    children = await processes_db.process_children(conn, [process_id])
    ancestors: set[bytes] = set()
    links: set[tuple[bytes, bytes]] = set()
    frontier = {process_id}
    while frontier:
        found = await processes_db.process_parents(conn, frontier)
        links |= found
        frontier = {parent for parent, _ in found} - ancestors - {process_id}
        ancestors |= frontier
    running = await processes_db.transformations_running(conn, ancestors | {process_id})
    return Lineage(
        process_id=process_id,
        references=tuple(sorted(child for _, child in children)),
        composed_by=tuple(sorted(ancestors)),
        transformations=tuple(running),
        links=frozenset(links),
    )
