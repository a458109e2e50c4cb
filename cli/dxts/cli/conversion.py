"""Option and argument text converted without pydantic, for the parameters that need nothing
more than a constructor.

typer (0.29) converts every parameter's text through a pydantic TypeAdapter, so that any
command imports pydantic, the largest single import of a read verb like `dxts list`. A
parameter annotated `str`, `bool`, `int` or `float` (within its range, if it has one), a `Path` with
no checks, an enum of strings, or a list of strings, with no parser or count, is converted here
instead, as typer would; any other parameter (and any typer whose parameters look otherwise)
keeps typer's own conversion, so this can only make a command start sooner, never accept what
typer would refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

from typer._click.exceptions import BadParameter


# What a plain annotation's text becomes, and the name a refusal gives its type.
def _boolean(text: str) -> bool:
    found = BOOLEANS.get(text.strip().lower())
    if found is None:
        raise ValueError(text)
    return found


BOOLEANS = {"1": True, "true": True, "yes": True, "on": True}
BOOLEANS |= {"0": False, "false": False, "no": False, "off": False}
CONSTRUCTORS: dict[Any, tuple[Callable[[str], Any], str]] = {
    str: (str, "text"),
    int: (int, "integer"),
    float: (float, "float"),
    bool: (_boolean, "boolean"),
}


class PlainConversion:
    """A typer parameter's runtime conversion (its `coerce`), by a constructor, within the
    parameter's range (`low`, `high`: None for none)."""

    def __init__(
        self,
        convert: Callable[[str], Any],
        label: str,
        low: float | None = None,
        high: float | None = None,
    ) -> None:
        self.convert = convert
        self.label = label
        self.low = low
        self.high = high

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if param.multiple:
            return [self._one(item, param, ctx) for item in value or ()]
        return None if value is None else self._one(value, param, ctx)

    def _one(self, value: Any, param: Any, ctx: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            found = self.convert(value)
        except ValueError:
            raise BadParameter(
                f"{value!r} is not a valid {self.label}.", ctx=ctx, param=param
            ) from None
        if self.low is not None and found < self.low:
            raise BadParameter(f"{value} is below the minimum, {self.low}.", ctx=ctx, param=param)
        if self.high is not None and found > self.high:
            raise BadParameter(f"{value} is above the maximum, {self.high}.", ctx=ctx, param=param)
        return found


def convert_plainly(command: Any) -> None:
    """Give each plain parameter of `command` (a click command built by typer) its conversion,
    those click adds when it parses (`--help`) included."""
    listed = command.get_params

    def get_params(ctx: Any) -> list[Any]:
        params: list[Any] = listed(ctx)
        convert_params(params)
        return params

    command.get_params = get_params


def convert_params(params: Any) -> None:
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", "") is not None:
            continue
        if param.nargs != 1:
            continue
        annotation, info = descriptor.annotation, descriptor.parameter_info
        if param.multiple:
            if annotation != list[str] or not _plain(info):
                continue
            param._runtime_param = PlainConversion(str, "text")
            continue
        found = _conversion(annotation, info)
        if found is not None:
            param._runtime_param = found


def _plain(info: Any) -> bool:
    return all(
        getattr(info, name, None) in (None, False)
        for name in ("parser", "count", "formats", "exists", "resolve_path", "clamp")
    )


def _conversion(annotation: Any, info: Any) -> PlainConversion | None:
    if not _plain(info):
        return None
    low, high = getattr(info, "min", None), getattr(info, "max", None)
    if annotation in (int, float):
        return PlainConversion(*CONSTRUCTORS[annotation], low, high)
    if low is not None or high is not None:
        return None
    if annotation in (str, bool):
        return PlainConversion(*CONSTRUCTORS[annotation])
    if annotation is Path and getattr(info, "path_type", None) is None:
        return PlainConversion(Path, "path")
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return PlainConversion(
            _enum_member(annotation, bool(getattr(info, "case_sensitive", True))),
            "choice: " + ", ".join(str(m.value) for m in annotation),
        )
    return None


def _enum_member(enum: type[Enum], case_sensitive: bool) -> Callable[[str], Enum]:
    def member(text: str) -> Enum:
        for candidate in enum:
            value = str(candidate.value)
            if value == text or (not case_sensitive and value.lower() == text.lower()):
                return candidate
        raise ValueError(text)

    return member
