"""SQL of transformations, their compute rows, declared outputs and requirements templates.

Every function takes the caller's connection and runs in the caller's transaction; status
changes are conditional UPDATEs whose row counts the caller checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import (
    compute_transformations,
    ownership,
    requirements,
    transformation_outputs,
    transformations,
    workgraphs,
)


class TransformationOwner(NamedTuple):
    """Who owns a transformation, and its workgraph (None for a standalone one)."""

    vo: str
    sub: str
    workgraph_id: bytes | None


@dataclass(frozen=True)
class TransformationState:
    """What a transition of a transformation is decided on: its status and kind, its feeder
    binding and the operator's switch, its annotations."""

    transformation_id: bytes
    status: str
    kind: str
    feeder: str | None
    feeder_args: Any  # JSON, as stored
    feeder_enabled: bool  # the operator's switch
    annotations: dict[str, Any]  # {} when none are stored


STATE_COLUMNS = (
    transformations.c.TransformationID,
    transformations.c.Status,
    transformations.c.Kind,
    transformations.c.Feeder,
    transformations.c.FeederArgs,
    transformations.c.FeederEnabled,
    transformations.c.Annotations,
)


def state_record(row: Any) -> TransformationState:
    """The record of a row selected with STATE_COLUMNS."""
    return TransformationState(
        transformation_id=bytes(row.TransformationID),
        status=row.Status,
        kind=row.Kind,
        feeder=row.Feeder,
        feeder_args=row.FeederArgs,
        feeder_enabled=bool(row.FeederEnabled),
        annotations=row.Annotations if isinstance(row.Annotations, dict) else {},
    )


async def lock_transformation(
    conn: AsyncConnection, transformation_id: bytes
) -> tuple[TransformationState, TransformationOwner] | None:
    """A transformation and its owner, its row locked (see lock_workgraph: a member's caller
    locks the workgraph first)."""
    result = await conn.execute(
        sa.select(*STATE_COLUMNS, ownership.c.VO, ownership.c.Sub, ownership.c.WorkgraphID)
        .join(ownership, ownership.c.OwnershipID == transformations.c.OwnershipID)
        .where(transformations.c.TransformationID == transformation_id)
        .with_for_update()
    )
    row = result.one_or_none()
    if row is None:
        return None
    workgraph_id = bytes(row.WorkgraphID) if row.WorkgraphID is not None else None
    return state_record(row), TransformationOwner(row.VO, row.Sub, workgraph_id)


async def transformation_owner(
    conn: AsyncConnection, transformation_id: bytes
) -> TransformationOwner | None:
    """The owner of a transformation, without locking."""
    result = await conn.execute(
        sa.select(ownership.c.VO, ownership.c.Sub, ownership.c.WorkgraphID)
        .join(transformations, ownership.c.OwnershipID == transformations.c.OwnershipID)
        .where(transformations.c.TransformationID == transformation_id)
    )
    row = result.one_or_none()
    if row is None:
        return None
    workgraph_id = bytes(row.WorkgraphID) if row.WorkgraphID is not None else None
    return TransformationOwner(row.VO, row.Sub, workgraph_id)


async def transformation_status(conn: AsyncConnection, transformation_id: bytes) -> str | None:
    return await conn.scalar(
        sa.select(transformations.c.Status).where(
            transformations.c.TransformationID == transformation_id
        )
    )


async def set_transformations_status(
    conn: AsyncConnection, ids: list[bytes], source: str, target: str, now: datetime
) -> int:
    """The conditional UPDATE of transformations still in `source`; returns how many moved."""
    if not ids:
        return 0
    result = await conn.execute(
        sa.update(transformations)
        .where(transformations.c.TransformationID.in_(ids), transformations.c.Status == source)
        .values(Status=target, UpdatedAt=now)
    )
    return int(result.rowcount)


async def set_feeders_enabled(
    conn: AsyncConnection,
    ids: list[bytes],
    enabled: bool,
    now: datetime,
) -> int:
    """FeederEnabled (the operator's switch) for `ids`; returns rows changed."""
    if not ids:
        return 0
    values: dict[str, Any] = {"FeederEnabled": enabled, "UpdatedAt": now}
    result = await conn.execute(
        sa.update(transformations).where(transformations.c.TransformationID.in_(ids)).values(values)
    )
    return int(result.rowcount)


async def set_feeder_args(
    conn: AsyncConnection, transformation_id: bytes, args: Any, now: datetime
) -> None:
    await conn.execute(
        sa.update(transformations)
        .where(transformations.c.TransformationID == transformation_id)
        .values(FeederArgs=args, UpdatedAt=now)
    )


async def set_transformation_annotations(
    conn: AsyncConnection, transformation_id: bytes, annotations: Any, now: datetime
) -> None:
    await conn.execute(
        sa.update(transformations)
        .where(transformations.c.TransformationID == transformation_id)
        .values(Annotations=annotations, UpdatedAt=now)
    )


async def output_producers(
    conn: AsyncConnection, output_ids: Iterable[bytes]
) -> dict[bytes, bytes]:
    """TransformationOutputID → the TransformationID producing it."""
    wanted = list(set(output_ids))
    if not wanted:
        return {}
    result = await conn.execute(
        sa.select(
            transformation_outputs.c.TransformationOutputID,
            transformation_outputs.c.TransformationID,
        ).where(transformation_outputs.c.TransformationOutputID.in_(wanted))
    )
    return {bytes(o): bytes(t) for o, t in result}


@dataclass(frozen=True)
class TransformationRecord:
    """A Transformations row with its owner, its workgraph's status and annotations (None for a
    standalone transformation) and its compute columns (None for a data transformation)."""

    transformation_id: bytes
    type: str
    kind: str
    status: str
    executing_identity: str | None
    feeder: str | None
    feeder_args: Any  # JSON, as stored
    feeder_enabled: bool  # the operator's switch
    packer: str
    packer_args: Any  # JSON, as stored
    annotations: Any  # JSON, as stored
    hooks: Any  # JSON, as stored
    updated_at: datetime
    vo: str
    sub: str
    workgraph_id: bytes | None
    workgraph_status: str | None
    workgraph_annotations: Any  # JSON, as stored
    process_id: bytes | None
    requirements_template_id: bytes | None


def _optional_id(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _transformation_record(row: Any) -> TransformationRecord:
    return TransformationRecord(
        transformation_id=bytes(row.TransformationID),
        type=row.Type,
        kind=row.Kind,
        status=row.Status,
        executing_identity=row.ExecutingIdentity,
        feeder=row.Feeder,
        feeder_args=row.FeederArgs,
        feeder_enabled=bool(row.FeederEnabled),
        packer=row.Packer,
        packer_args=row.PackerArgs,
        annotations=row.Annotations,
        hooks=row.Hooks,
        updated_at=row.UpdatedAt,
        vo=row.VO,
        sub=row.Sub,
        workgraph_id=_optional_id(row.WorkgraphID),
        workgraph_status=row.WorkgraphStatus,
        workgraph_annotations=row.WorkgraphAnnotations,
        process_id=_optional_id(row.ProcessID),
        requirements_template_id=_optional_id(row.RequirementsTemplateID),
    )


async def transformation_rows(
    conn: AsyncConnection,
    *,
    ids: Iterable[bytes] | None = None,
    workgraph_id: bytes | None = None,
    statuses: Iterable[str] = (),
    kinds: Iterable[str] = (),
    type: str | None = None,
    vo: str | None = None,
    owner_sub: str | None = None,
    after: bytes | None = None,
    limit: int | None = None,
) -> list[TransformationRecord]:
    """Transformations with their owner, workgraph status and annotations, and compute
    columns (NULL for data transformations), in id order; every filter given must match."""
    query = (
        sa.select(
            transformations,
            ownership.c.VO,
            ownership.c.Sub,
            ownership.c.WorkgraphID,
            workgraphs.c.Status.label("WorkgraphStatus"),
            workgraphs.c.Annotations.label("WorkgraphAnnotations"),
            compute_transformations.c.ProcessID,
            compute_transformations.c.RequirementsTemplateID,
        )
        .join(ownership, ownership.c.OwnershipID == transformations.c.OwnershipID)
        .outerjoin(workgraphs, workgraphs.c.WorkgraphID == ownership.c.WorkgraphID)
        .outerjoin(
            compute_transformations,
            compute_transformations.c.TransformationID == transformations.c.TransformationID,
        )
    )
    if ids is not None:
        query = query.where(transformations.c.TransformationID.in_(list(ids)))
    if workgraph_id is not None:
        query = query.where(ownership.c.WorkgraphID == workgraph_id)
    for column, values in ((transformations.c.Status, statuses), (transformations.c.Kind, kinds)):
        wanted = list(values)
        if wanted:
            query = query.where(column.in_(wanted))
    if type:
        query = query.where(transformations.c.Type == type)
    if vo is not None:
        query = query.where(ownership.c["VO"] == vo)
    if owner_sub:
        query = query.where(ownership.c.Sub == owner_sub)
    if after is not None:
        query = query.where(transformations.c.TransformationID > after)
    query = query.order_by(transformations.c.TransformationID)
    if limit is not None:
        query = query.limit(limit)
    return [_transformation_record(row) for row in await conn.execute(query)]


class MemberRow(NamedTuple):
    """What attention reads of a member: no definition columns, no outputs."""

    transformation_id: bytes
    workgraph_id: bytes | None
    status: str
    annotations: Any  # JSON, as stored (its step is "id")
    workgraph_annotations: Any  # JSON, as stored (halted)
    updated_at: datetime


async def member_rows(conn: AsyncConnection, ids: Sequence[bytes]) -> list[MemberRow]:
    """The transformations of `ids`, as attention reads them, in one statement."""
    if not ids:
        return []
    t = transformations.c
    rows = await conn.execute(
        sa.select(
            t.TransformationID,
            ownership.c.WorkgraphID,
            t.Status,
            t.Annotations,
            workgraphs.c.Annotations.label("WorkgraphAnnotations"),
            t.UpdatedAt,
        )
        .join(ownership, ownership.c.OwnershipID == t.OwnershipID)
        .outerjoin(workgraphs, workgraphs.c.WorkgraphID == ownership.c.WorkgraphID)
        .where(t.TransformationID.in_(list(ids)))
    )
    return [MemberRow(bytes(r[0]), _optional_id(r[1]), r[2], r[3], r[4], r[5]) for r in rows]


class DeclaredOutput(NamedTuple):
    """A TransformationOutputs row: an output a transformation declares."""

    transformation_output_id: bytes
    transformation_id: bytes
    name: str
    intermediate: bool


async def outputs_of(
    conn: AsyncConnection, transformation_ids: Iterable[bytes]
) -> list[DeclaredOutput]:
    """The declared outputs of these transformations, by transformation and name."""
    wanted = list(set(transformation_ids))
    if not wanted:
        return []
    result = await conn.execute(
        sa.select(transformation_outputs)
        .where(transformation_outputs.c.TransformationID.in_(wanted))
        .order_by(transformation_outputs.c.TransformationID, transformation_outputs.c.Name)
    )
    return [
        DeclaredOutput(
            bytes(row.TransformationOutputID),
            bytes(row.TransformationID),
            row.Name,
            bool(row.Intermediate),
        )
        for row in result
    ]


async def requirements_of(
    conn: AsyncConnection, ids: Iterable[bytes]
) -> dict[bytes, dict[str, Any]]:
    """Requirement sets by hash."""
    wanted = list(set(ids))
    if not wanted:
        return {}
    result = await conn.execute(
        sa.select(requirements.c.RequirementsID, requirements.c.Requirements).where(
            requirements.c.RequirementsID.in_(wanted)
        )
    )
    return {bytes(key): body for key, body in result}


async def templates(conn: AsyncConnection, ids: Iterable[bytes]) -> dict[bytes, dict[str, Any]]:
    """TransformationID → its requirements template ({} when it has none), for compute
    transformations only."""
    wanted = list(set(ids))
    if not wanted:
        return {}
    result = await conn.execute(
        sa.select(compute_transformations.c.TransformationID, requirements.c.Requirements)
        .outerjoin(
            requirements,
            requirements.c.RequirementsID == compute_transformations.c.RequirementsTemplateID,
        )
        .where(compute_transformations.c.TransformationID.in_(wanted))
    )
    return {bytes(t): body if isinstance(body, dict) else {} for t, body in result}


async def set_template(conn: AsyncConnection, transformation_id: bytes, template_id: bytes) -> None:
    await conn.execute(
        sa.update(compute_transformations)
        .where(compute_transformations.c.TransformationID == transformation_id)
        .values(RequirementsTemplateID=template_id)
    )
