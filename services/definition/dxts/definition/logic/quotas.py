"""The active-workgraphs quota (`policy.quotas.active_workgraphs_per_user`): checked in the
transaction that submits a workgraph and in the one that starts it.

A submission is refused when its owner already has that many workgraphs not yet ended (New
ones included: each is a start waiting to happen); a start when the owner already has that
many started and not ended (Scouting to Finalizing, and Cancelling: its parcels still run).
The quota is the owner's, whoever starts the workgraph. The owner's lock row
(`store.quota_locks`) is taken before the count, so that two submissions or starts at once take
turns and the second counts what the first made. The other quotas are the feeding path's
(execution).
"""

from __future__ import annotations

from dxts.core.db import Transaction
from dxts.core.errors import FailedPrecondition
from dxts.core.policy import Policy
from dxts.core.states import WorkgraphStatus
from dxts.definition.store import quota_locks
from dxts.definition.store import workgraphs as workgraphs_db

W = WorkgraphStatus
STARTED = (
    W.SCOUTING,
    W.APPROVING,
    W.APPROVING_BLOCKED,
    W.ACTIVE,
    W.FINALIZING,
    W.CANCELLING,
)
NOT_ENDED = (W.NEW, *STARTED)


async def check_active_workgraphs(
    conn: Transaction, policy: Policy, vo: str, sub: str, *, starting: bool
) -> None:
    """FailedPrecondition naming the limit when `sub` of `vo` is at it (see the module)."""
    limit = policy.for_vo(vo).quotas.active_workgraphs_per_user
    if limit is None:
        return
    statuses = STARTED if starting else NOT_ENDED
    await quota_locks.lock_owner(conn, vo, sub)
    count = await workgraphs_db.count_owned(conn, vo, sub, [s.value for s in statuses])
    if count >= limit:
        which = "started and not ended" if starting else "not yet ended"
        raise FailedPrecondition(
            f"{sub} already has {count} workgraphs {which} in VO {vo}: the installation allows "
            f"{limit} (policy.quotas.active_workgraphs_per_user); wait for one to end, or cancel "
            "one"
        )
