"""What a name a person typed stands for (ResolveName): a handle (`wg-42`, `wg-42/Reco`,
`t-7`), a full id, a prefix of an id, or `WG/STEP`.

Every form is one or two index probes: a handle is its table's primary key, an id the entity's,
a prefix a range of the entity's primary key, a step one workgraph's members. A name is
resolved within the caller's VO: another VO's workgraph is "not found", exactly as an unknown
one, and an ambiguous prefix names only the candidates the caller may see.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dxts.core.db import Database, Isolation, Transaction
from dxts.core.errors import InvalidArgument, NotFound
from dxts.core.handles import handle as handle_of
from dxts.core.handles import member_handle, parse
from dxts.core.ids import UUID_BYTES, id_from_str, id_to_str
from dxts.definition.logic.queries import Viewer
from dxts.definition.store import handles as handles_db
from dxts.definition.store import transformations as transformations_db
from dxts.definition.store import workgraphs as workgraphs_db

# An id's prefix must be at least this many hex digits (fewer names too much to be useful).
MIN_PREFIX = 4
# Candidates named when a prefix is ambiguous.
SHOWN_CANDIDATES = 5
_HEX_PREFIX = re.compile(r"[0-9a-f-]+")
_FULL_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
FIELD = "name"
# A step name is a CWL id; nothing longer names anything.
MAX_NAME = 512


@dataclass(frozen=True)
class Resolved:
    kind: str  # "workgraph" | "transformation"
    id: bytes
    handle: str
    workgraph_id: bytes | None = None


async def resolve(database: Database, viewer: Viewer, name: str) -> Resolved:
    """The workgraph or member `name` stands for, as the caller may see it."""
    text = name.strip()
    if not text:
        raise InvalidArgument("name a workgraph or a member", field=FIELD)
    if len(text) > MAX_NAME:
        raise InvalidArgument(f"a name is at most {MAX_NAME} characters", field=FIELD)

    async def work(conn: Transaction) -> Resolved:
        workgraph, slash, step = text.partition("/")
        if slash:
            found = await _one(conn, viewer, workgraph)
            if found.kind != "workgraph":
                raise InvalidArgument(
                    f"{workgraph} is a member ({found.handle}), not a workgraph", field=FIELD
                )
            return await _member(conn, viewer, found, step)
        return await _one(conn, viewer, text)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def _one(conn: Transaction, viewer: Viewer, text: str) -> Resolved:
    handle = parse(text)
    if handle is not None:
        kind, number = handle
        if kind == "parcel":
            raise InvalidArgument(
                f"{text} is a parcel (see `dxts parcel {text}`), not a workgraph or a member",
                field=FIELD,
            )
        found = (
            await handles_db.workgraph_of_number(conn, number)
            if kind == "workgraph"
            else await handles_db.transformation_of_number(conn, number)
        )
        seen = await _visible(conn, viewer, [(kind, found)] if found else [])
        if not seen:
            raise NotFound(kind, text)
        return seen[0]
    lowered = text.lower()
    if _FULL_ID.fullmatch(lowered):
        raw = id_from_str(lowered, field=FIELD)
        seen = await _visible(conn, viewer, [("workgraph", raw), ("transformation", raw)])
        if not seen:
            raise NotFound("workgraph or member", text)
        return seen[0]
    if not _HEX_PREFIX.fullmatch(lowered):
        raise NotFound("workgraph or member", text)
    digits = lowered.replace("-", "")
    if len(digits) < MIN_PREFIX:
        raise InvalidArgument(
            f"{text!r} is too short to name anything: give a handle (wg-42) or at least "
            f"{MIN_PREFIX} hex digits of an id",
            field=FIELD,
        )
    low = bytes.fromhex(digits.ljust(UUID_BYTES * 2, "0")[: UUID_BYTES * 2])
    high = bytes.fromhex(digits.ljust(UUID_BYTES * 2, "f")[: UUID_BYTES * 2])
    candidates = await handles_db.ids_in_range(conn, low, high, limit=SHOWN_CANDIDATES + 1)
    seen = await _visible(conn, viewer, candidates)
    if not seen:
        raise NotFound("workgraph or member id starting with", text)
    if len(seen) > 1:
        named = ", ".join(f"{r.handle} ({id_to_str(r.id)})" for r in seen[:SHOWN_CANDIDATES])
        more = " and more" if len(seen) > SHOWN_CANDIDATES else ""
        raise InvalidArgument(
            f"{text!r} is ambiguous: it starts {named}{more}; give more characters or a handle",
            field=FIELD,
        )
    return seen[0]


async def _visible(
    conn: Transaction, viewer: Viewer, candidates: list[tuple[str, bytes]]
) -> list[Resolved]:
    """The candidates that exist and that the caller may see, with their handles."""
    workgraph_ids = [i for kind, i in candidates if kind == "workgraph"]
    member_ids = [i for kind, i in candidates if kind == "transformation"]
    found: list[Resolved] = []
    if workgraph_ids:
        rows = await workgraphs_db.workgraph_rows(conn, ids=workgraph_ids)
        numbers = await handles_db.workgraph_numbers(conn, [r.workgraph_id for r in rows])
        found += [
            Resolved("workgraph", r.workgraph_id, handle_of("workgraph", numbers[r.workgraph_id]))
            for r in rows
            if viewer.sees(r.vo) and r.workgraph_id in numbers
        ]
    if member_ids:
        members = [
            r
            for r in await transformations_db.transformation_rows(conn, ids=member_ids)
            if viewer.sees(r.vo)
        ]
        numbers = await handles_db.transformation_numbers(
            conn, [r.transformation_id for r in members]
        )
        owners = await handles_db.workgraph_numbers(
            conn, {r.workgraph_id for r in members if r.workgraph_id is not None}
        )
        for r in members:
            step = r.annotations.get("id") if isinstance(r.annotations, dict) else None
            number = owners.get(r.workgraph_id) if r.workgraph_id else None
            name = member_handle(number, str(step or ""), numbers.get(r.transformation_id))
            found.append(Resolved("transformation", r.transformation_id, name, r.workgraph_id))
    return found


async def _member(conn: Transaction, viewer: Viewer, workgraph: Resolved, step: str) -> Resolved:
    steps = await handles_db.member_of_step(conn, workgraph.id)
    found = steps.get(step)
    if found is None:
        folded = {s.lower(): i for s, i in steps.items()}
        found = folded.get(step.lower())
    if found is None:
        raise InvalidArgument(
            f"{workgraph.handle} has no member {step!r} (its members: "
            f"{', '.join(sorted(steps)) or 'none'})",
            field=FIELD,
        )
    (member,) = await _visible(conn, viewer, [("transformation", found)])
    return member
