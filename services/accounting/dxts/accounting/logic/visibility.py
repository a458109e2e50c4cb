"""What a caller may read and rebuild: accounting keeps counters and logs by transformation and
workgraph, but who owns them is the definition side's to say (`members.MemberLister`, asked
with the caller's own token: another VO's transformation or workgraph is NotFound, as if it
did not exist).

dxts's own components (the `service` kind: definition's lifecycle reads counts all the time)
read every VO without asking. A rebuild is a VO operator's over its own VO's transformations,
an installation admin's over any.
"""

from __future__ import annotations

from collections.abc import Sequence

from dxts.accounting.logic.members import MemberLister
from dxts.core.errors import PermissionDenied
from dxts.core.identity import Identity
from dxts.core.kernel.authorisation import CallerKind


def reads_every_vo(identity: Identity) -> bool:
    return identity.has_role(CallerKind.SERVICE)


async def check_readable(
    lister: MemberLister,
    identity: Identity,
    token: str | None,
    *,
    transformation_ids: Sequence[bytes] = (),
    workgraph_id: bytes | None = None,
) -> None:
    """NotFound unless `identity` may read every one of `transformation_ids` and the workgraph."""
    if reads_every_vo(identity):
        return
    if workgraph_id is not None:
        await lister.workgraph(workgraph_id, token=token)
    if transformation_ids:
        await lister.check_transformations(sorted(set(transformation_ids)), token=token)


async def readable_scope(
    lister: MemberLister, identity: Identity, token: str | None, asked: Sequence[bytes]
) -> list[bytes] | None:
    """The transformations a read over `asked` covers: None for every one (a service asking
    for all); a caller of a VO asking for all gets its VO's."""
    if asked:
        await check_readable(lister, identity, token, transformation_ids=asked)
        return list(asked)
    if reads_every_vo(identity):
        return None
    return await lister.transformations_of(identity.vo, token=token)


async def rebuild_scope(
    lister: MemberLister,
    identity: Identity,
    token: str | None,
    asked: Sequence[bytes] | None,
    *,
    operator_role: str,
) -> list[bytes] | None:
    """The transformations a rebuild by `identity` covers (None: every one, an admin's)."""
    if identity.has_role(CallerKind.ADMIN):
        return None if asked is None else list(asked)
    if not identity.has_role(operator_role):
        raise PermissionDenied(
            f"rebuilding counters needs the {operator_role!r} role (its VO) or "
            f"{CallerKind.ADMIN.value!r} (every VO)"
        )
    if asked is None:
        return await lister.transformations_of(identity.vo, token=token)
    await lister.check_transformations(asked, token=token)
    return list(asked)
