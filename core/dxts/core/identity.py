"""Who is calling: the Identity every layer may read, whatever carried the request in.

The gRPC server's authentication (`dxts.core.grpc.auth`, `dxts.core.grpc.interceptors`)
verifies the caller's token and serves the request `acting_as` the identity it proves; sweeps
and tests act as theirs the same way. Logic takes an `Identity` or reads `current_identity()`,
and knows nothing of tokens or transports.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from dxts.core.errors import Unauthenticated


@dataclass(frozen=True)
class Identity:
    """The authenticated caller."""

    vo: str
    sub: str
    roles: frozenset[str] = frozenset()
    # What people call the caller (a DiracX `preferred_username`) and the DiracX group its
    # token was issued for; empty for dxts's own tokens, where `sub` is the name.
    name: str = ""
    group: str = ""

    def has_role(self, role: str) -> bool:
        return role in self.roles

    @property
    def display_name(self) -> str:
        """The name logs and pages show: the DiracX user name, else the subject."""
        return self.name or self.sub


_current_identity: ContextVar[Identity | None] = ContextVar("dxts_identity", default=None)


def current_identity() -> Identity:
    """The caller of the request being served; Unauthenticated outside an authenticated one."""
    identity = _current_identity.get()
    if identity is None:
        raise Unauthenticated("no authenticated caller in this context")
    return identity


@contextlib.contextmanager
def acting_as(identity: Identity) -> Iterator[Identity]:
    """Run a block as `identity` (what the server does per request; sweeps and tests)."""
    token = _current_identity.set(identity)
    try:
        yield identity
    finally:
        _current_identity.reset(token)
