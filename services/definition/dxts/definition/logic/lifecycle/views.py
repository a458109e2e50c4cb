"""What the engine shows plugins, built from the definition service's own reads.

`read_workgraph` is one READ COMMITTED read (`queries.get_workgraph`, as dxts's own service
identity): the workgraph, its members with their dataflow edges, its actions, its document. The
plugin views are snapshots (`dxts.core.plugins.Workgraph`, `Transformation`). The workgraph's
view carries, under `annotations["target"]`, the document's `target` of dirac:Workgraph resolved
to the member and output producing it (`step`, `step_output`), which is what the built-in
OutputTarget hook counts; nothing stores it, the document is the source.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from dxts.core.db import Database, Isolation
from dxts.core.identity import Identity
from dxts.core.plugins import Transformation, Workgraph
from dxts.core.states import Kind, TransformationStatus, WorkgraphStatus
from dxts.definition.logic import queries
from dxts.definition.logic.queries import TransformationView, WorkgraphDetail
from dxts.definition.store import transformations as transformations_db

DIRAC_NAMESPACE = "https://diracgrid.org/cwl#"
AUTHOR = "dxts-lifecycle"
SERVICE = queries.Viewer(Identity("dxts", AUTHOR, frozenset({"service"})), "service")


async def read_workgraph(database: Database, workgraph_id: bytes) -> WorkgraphDetail:
    return await queries.get_workgraph(database, SERVICE, workgraph_id)


async def declared_outputs(
    database: Database, transformation_id: uuid.UUID
) -> dict[uuid.UUID, tuple[str, bool]]:
    """A transformation's declared outputs: TransformationOutputID → (name, Intermediate)."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = await transformations_db.outputs_of(conn, [transformation_id.bytes])
    return {uuid.UUID(bytes=r.transformation_output_id): (r.name, r.intermediate) for r in rows}


async def output_producer(database: Database, output_id: uuid.UUID) -> uuid.UUID | None:
    """The transformation producing a declared output; None when there is no such output."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        producers = await transformations_db.output_producers(conn, [output_id.bytes])
    producer = producers.get(output_id.bytes)
    return None if producer is None else uuid.UUID(bytes=producer)


class DefinitionSiblings:
    """`Siblings` from the definition service's own rows."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def members(self, workgraph_id: uuid.UUID) -> dict[str, Transformation]:
        detail = await read_workgraph(self._database, workgraph_id.bytes)
        return {name_of(m): transformation_view(m) for m in detail.members}


def as_uuid(identifier: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=identifier)


def name_of(member: TransformationView) -> str:
    return member.step or str(as_uuid(member.transformation_id))


def transformation_view(member: TransformationView) -> Transformation:
    return Transformation(
        id=as_uuid(member.transformation_id),
        type=member.type,
        kind=Kind(member.kind),
        status=TransformationStatus(member.status),
        feeder=member.feeder,
        feeder_args=member.feeder_args if isinstance(member.feeder_args, dict) else {},
        feeder_enabled=member.feeder_enabled,
        packer=member.packer,
        packer_args=member.packer_args if isinstance(member.packer_args, dict) else {},
        workgraph_id=None if member.workgraph_id is None else as_uuid(member.workgraph_id),
        annotations=dict(member.annotations or {}),
        upstream_ids=tuple(as_uuid(u) for u in member.upstream_ids),
        producer_id=None if member.producer_id is None else as_uuid(member.producer_id),
    )


def workgraph_view(detail: WorkgraphDetail) -> Workgraph:
    workgraph = detail.workgraph
    annotations = dict(workgraph.annotations or {})
    target = document_target(detail.stripped_spec, {name_of(m): m for m in detail.members})
    if target is not None and "target" not in annotations:
        annotations["target"] = target
    return Workgraph(
        id=as_uuid(workgraph.workgraph_id),
        type=workgraph.type,
        status=WorkgraphStatus(workgraph.status),
        annotations=annotations,
    )


def upstream(members: Iterable[TransformationView]) -> dict[bytes, set[bytes]]:
    """Each member's upstream members: producers of its Edge feeder and its `after` members."""
    found = list(members)
    ids = {m.transformation_id for m in found}
    return {m.transformation_id: set(m.upstream_ids) & ids for m in found}


# -- the document's target --------------------------------------------------------------------


def _entries(value: Any, key: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, body) of a CWL map-or-list field (`hints` by class, `outputs` by id)."""
    if isinstance(value, Mapping):
        return [(str(k), dict(v)) for k, v in value.items() if isinstance(v, Mapping)]
    if isinstance(value, list):
        return [
            (str(item[key]), dict(item))
            for item in value
            if isinstance(item, Mapping) and isinstance(item.get(key), str)
        ]
    return []


def _is_workgraph_hint(cls: str, namespaces: Mapping[str, Any]) -> bool:
    if cls == f"{DIRAC_NAMESPACE}Workgraph":
        return True
    prefix, _, local = cls.partition(":")
    return local == "Workgraph" and namespaces.get(prefix) == DIRAC_NAMESPACE


def _process(spec: Any) -> dict[str, Any]:
    """The workflow itself (a packed document's `#main`)."""
    if not isinstance(spec, Mapping):
        return {}
    graph = spec.get("$graph")
    if isinstance(graph, list):
        for item in graph:
            if isinstance(item, Mapping) and str(item.get("id", "")).lstrip("#") == "main":
                return {**dict(item), "$namespaces": spec.get("$namespaces") or {}}
        return {}
    return dict(spec)


def document_target(spec: Any, members: Mapping[str, TransformationView]) -> dict[str, Any] | None:
    """`target` of dirac:Workgraph with the member and output that produce it, or None."""
    process = _process(spec)
    namespaces = process.get("$namespaces") or {}
    hint = next(
        (
            body
            for cls, body in _entries(process.get("hints"), "class")
            if _is_workgraph_hint(cls, namespaces)
        ),
        None,
    )
    target = (hint or {}).get("target")
    if not isinstance(target, Mapping) or not isinstance(target.get("output"), str):
        return None
    wanted = target["output"]
    for name, body in _entries(process.get("outputs"), "id"):
        if name.lstrip("#").rsplit("/", 1)[-1] != wanted:
            continue
        source = body.get("outputSource")
        sources = source if isinstance(source, list) else [source]
        for text in sources:
            parts = str(text).lstrip("#").split("/")
            if len(parts) >= 2 and parts[-2] in members:
                return {**dict(target), "step": parts[-2], "step_output": parts[-1]}
    return None
