"""Choosing a parcel's backend at claim (docs/dispatching.md).

A backend the packer set on the parcel is kept. Otherwise the kind's policy decides: its
default, except for a stable fraction of parcels routed to a second backend. The fraction is
taken by hashing the ParcelID, so it needs no coordination between replicas, gives the same
answer every time a parcel is dispatched again, and spreads evenly within each transformation
(UUIDv7 ids are time-ordered; their hash is not): this is how an installation moves work from
one backend to another a fraction at a time.
"""

from __future__ import annotations

import hashlib

from dxts.core.states import Kind
from dxts.dispatcher.settings import DispatcherSettings


def route_point(parcel_id: bytes) -> float:
    """The parcel's stable point in [0, 1): the first 8 bytes of SHA-256(ParcelID)."""
    return int.from_bytes(hashlib.sha256(parcel_id).digest()[:8], "big") / 2**64


class Policy:
    def __init__(self, settings: DispatcherSettings) -> None:
        self._kinds = {kind: settings.kind_policy(kind) for kind in Kind}
        self.known = frozenset(backend.name for backend in settings.backends)

    def kinds(self) -> list[Kind]:
        """The kinds some backend takes: the ones worth claiming."""
        return [kind for kind, policy in self._kinds.items() if policy is not None]

    def choose(self, parcel_id: bytes, kind: Kind, directed: str | None) -> str | None:
        """The backend for one parcel (the one execution `directed` it to, if any); None when
        nothing configured here takes it."""
        if directed is not None:
            return directed if directed in self.known else None
        policy = self._kinds[kind]
        if policy is None:
            return None
        if policy.route is not None and route_point(parcel_id) < policy.route.fraction:
            return policy.route.backend
        return policy.default
