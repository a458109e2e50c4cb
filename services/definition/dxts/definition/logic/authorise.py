"""Who may steer what: the caller of a command and the rule every command checks.

A caller from another VO is told NOT_FOUND (existence is not leaked), a plain user may steer
only what it owns, the operator role anything of its VO.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dxts.core.errors import NotFound, PermissionDenied
from dxts.core.identity import Identity
from dxts.core.ids import id_to_str
from dxts.core.policy import Policy

AUTHOR_LENGTH = 64


@dataclass(frozen=True)
class Caller:
    """The authenticated caller of a command, the role that makes it an operator, and the
    installation's policy its commands answer to (who may sign off, the quotas)."""

    identity: Identity
    operator_role: str = "operator"
    policy: Policy = field(default_factory=Policy)

    @property
    def author(self) -> str:
        """The name the logs show: a DiracX user's name, else the token's subject."""
        return self.identity.display_name[:AUTHOR_LENGTH]

    @property
    def is_operator(self) -> bool:
        return self.identity.has_role(self.operator_role)


def authorise(caller: Caller, vo: str, sub: str, kind: str, identifier: bytes) -> None:
    """NotFound across VOs; PermissionDenied to a plain user steering someone else's."""
    if caller.identity.vo != vo:
        raise NotFound(kind, id_to_str(identifier))
    if caller.identity.sub != sub and not caller.is_operator:
        raise PermissionDenied(
            f"{kind} {id_to_str(identifier)} belongs to {sub}: steering it needs the "
            f"{caller.operator_role!r} role"
        )


def command_data(request_id: str, reason: str, **extra: Any) -> dict[str, Any]:
    """A command's log Data: its request id (how a retry is recognised), reason and extras."""
    data = {"request_id": request_id, "reason": reason, **extra}
    return {k: v for k, v in data.items() if v not in (None, "", [], {})}
