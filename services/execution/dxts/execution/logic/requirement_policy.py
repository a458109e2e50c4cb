"""A packed parcel's requirements held to the installation's policy (`dxts.core.policy`).

A compute member's template was held to the policy when it was compiled and whenever an action
rewrote it; what a packer proposes for one parcel (`ComputeParcel.requirements`) and what a
retry rule raises (`RetryWith`) are added on top of it at packing, so they are held here, in
the transaction that writes the parcel: a value over a `cap` limit is lowered to it; a value
over a `refuse` limit, or a partition or site off an allow-list, means the parcel is not made:
its inputs are set aside Problematic with the limit named (the member's attention shows them),
as a plugin's proposal the core cannot apply.
"""

from __future__ import annotations

from typing import Any

from dxts.core.policy import Policy
from dxts.execution.store import packing as db


def held_to_policy(target: db.Target, pending: db.Batch, policy: Policy) -> None:
    """Lower or refuse (see the module) the additions of each parcel of `pending` that adds
    requirements to its template; the parcels adding none are the template's, already held."""
    template = target.requirements_template or {}
    kept: list[db.Decided] = []
    for decided in pending.parcels:
        if not decided.requirements:
            kept.append(decided)
            continue
        merged = {**template, **decided.requirements}
        problems = policy.requirement_problems(merged)
        if problems:
            reason = "its parcel's requirements are refused: " + "; ".join(w for _, w in problems)
            pending.bad.extend((input_id, reason) for input_id in decided.input_ids)
            continue
        held = policy.capped(merged)
        if held is not merged:
            lowered: dict[str, Any] = {k: v for k, v in held.items() if merged.get(k) != v}
            decided = decided._replace(requirements={**decided.requirements, **lowered})
        kept.append(decided)
    pending.parcels = kept
