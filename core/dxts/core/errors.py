"""The domain error hierarchy.

Every public function of dxts raises one of these for anything a caller did wrong or anything the
outside world refused; the gRPC interceptor maps each class to one status code, so servicers never
choose codes themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class DxtsError(Exception):
    """Base of every error dxts raises on purpose."""


@dataclass(frozen=True)
class FieldViolation:
    """One problem with one field: `field` is a dotted path into the request or document."""

    field: str
    description: str


class InvalidArgument(DxtsError):
    """Bad input: the request or document is wrong, and nothing was changed.

    Carries every problem found (not only the first), each with the path of the field at fault.
    """

    def __init__(
        self, violations: Sequence[FieldViolation] | FieldViolation | str, *, field: str = ""
    ) -> None:
        if isinstance(violations, str):
            violations = [FieldViolation(field, violations)]
        elif isinstance(violations, FieldViolation):
            violations = [violations]
        self.violations: list[FieldViolation] = list(violations)
        if not self.violations:
            raise ValueError("InvalidArgument needs at least one violation")
        super().__init__(
            "; ".join(
                f"{v.field}: {v.description}" if v.field else v.description for v in self.violations
            )
        )


class NotFound(DxtsError):
    """An id that names nothing (of the kind asked for) the caller may see."""

    def __init__(self, kind: str, identifier: object) -> None:
        self.kind = kind
        self.identifier = identifier
        super().__init__(f"{kind} {identifier} not found")


class FailedPrecondition(DxtsError):
    """The operation is well formed but not allowed in the entity's current state."""

    def __init__(self, message: str, *, current_state: str | None = None) -> None:
        self.current_state = current_state
        super().__init__(message)


class InvalidTransition(FailedPrecondition):
    """A state machine refuses the transition; names the entity, its state and the target."""

    def __init__(
        self,
        entity: str,
        current: str,
        attempted: str,
        *,
        actor: str | None = None,
        identifier: object = None,
    ) -> None:
        self.entity = entity
        self.current = current
        self.attempted = attempted
        self.actor = actor
        self.identifier = identifier
        who = f" by {actor}" if actor else ""
        which = f" {identifier}" if identifier is not None else ""
        super().__init__(
            f"{entity}{which} is {current}: transition to {attempted}{who} is not allowed",
            current_state=current,
        )


class PermissionDenied(DxtsError):
    """The caller is authenticated but may not do this."""


class Unauthenticated(DxtsError):
    """No token, or one that does not verify."""


class Aborted(DxtsError):
    """A transaction gave up after exhausting its deadlock retries; the caller may retry."""


class DeadlineExceeded(DxtsError):
    """The caller's deadline passed (or the call was abandoned) before the work was done; what
    was done is rolled back."""


class Unavailable(DxtsError):
    """A dependency (the database, another service) cannot be reached right now."""


class AlreadyExists(DxtsError):
    """A create named something that exists and may not be replaced (e.g. a registry name)."""
