"""Plugin arguments: one pydantic model per plugin, validated for a phase, errors as field paths.

Arguments are validated at submission (the document is refused) and again before each call
(the column may have been changed by a hook since). The phase rule — arguments
valid outside a scout but contradictory inside one are refused at submission — is a plugin's
own: derive from `PluginArgs` and override `check_phase`, or read `info.context["phase"]` in a
validator of any pydantic model. Both see the `Phase` being validated for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.plugins.points import Phase
from dxts.core.plugins.proposals import FieldError

M = TypeVar("M", bound=BaseModel)


class PluginArgs(BaseModel):
    """Base for an args model: unknown keys are refused, and the phase rule has a place."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def check_phase(self, phase: Phase) -> None:
        """Raise `InvalidArgument` (with a field) or `ValueError` if contradictory in `phase`."""


class NoArgs(PluginArgs):
    """The model of a plugin that declares no args parameter: any argument is refused."""


def validate_model(model: type[M], args: Any, *, phase: Phase, field: str = "args") -> M:
    """`args` (a JSON object or None) as an instance of `model`, valid for `phase`."""
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise InvalidArgument(f"must be an object, got {type(args).__name__}", field=field)
    try:
        value = model.model_validate(dict(args), context={"phase": Phase(phase)})
    except ValidationError as error:
        raise InvalidArgument(violations(error, field)) from None
    if isinstance(value, PluginArgs):
        try:
            value.check_phase(Phase(phase))
        except InvalidArgument as error:
            raise InvalidArgument(
                [
                    FieldViolation(join(field, v.field), f"while {phase}: {v.description}")
                    for v in error.violations
                ]
            ) from None
        except ValueError as error:
            raise InvalidArgument(f"while {phase}: {error}", field=field) from None
    return value


def violations(
    error: ValidationError, prefix: str = "", fields: tuple[str, ...] = ()
) -> list[FieldViolation]:
    """One FieldViolation per pydantic error, at `prefix` + the error's location.

    `fields` names positional arguments (a dataclass built positionally reports an index); a
    `FieldError` raised by a cross-field check names its own field.
    """
    found = []
    for item in error.errors(include_url=False):
        location: list[str | int] = list(item["loc"])
        if location and isinstance(location[0], int) and location[0] < len(fields):
            location[0] = fields[location[0]]
        cause = (item.get("ctx") or {}).get("error")
        if isinstance(cause, FieldError):
            location.append(cause.field)
        message = str(cause) if isinstance(cause, ValueError) else item["msg"]
        found.append(FieldViolation(join(prefix, *location), message))
    return found


def positional_fields(cls: type) -> tuple[str, ...]:
    """The init-field names of a dataclass in order (to name positional errors)."""
    if not dataclasses.is_dataclass(cls):
        return ()
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def join(prefix: str, *parts: str | int) -> str:
    """A dotted field path: `a.b[2].c`."""
    path = prefix
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path
