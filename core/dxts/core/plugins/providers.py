"""What the core can inject into a plugin, by the type a parameter is annotated with.

A process registers, for each type it can supply, an instance or a zero-argument factory (plain
or async, called once, on first use). A settings class (any `pydantic_settings.BaseSettings`
subclass, an experiment's own included) needs no registration: it is read from the environment
once, when the registry is checked at start-up, so a bad environment stops the process there.
Matching is by exact type: a parameter annotated with an interface gets what was registered for
that interface, which keeps the choice explicit where several implementations exist.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from pydantic_settings import BaseSettings

T = TypeVar("T")

_MISSING = object()


class Providers:
    """Type → instance or factory; resolved values are cached for the life of the process."""

    def __init__(self) -> None:
        self._factories: dict[type, Callable[[], Any]] = {}
        self._values: dict[type, Any] = {}
        self._lock = asyncio.Lock()

    def add(self, annotation: type[T], instance: T) -> None:
        """Supply parameters annotated `annotation` with `instance`."""
        self._refuse_second(annotation)
        self._values[annotation] = instance

    def add_factory(self, annotation: type[T], factory: Callable[[], T | Awaitable[T]]) -> None:
        """Supply `annotation` with what `factory()` returns (awaited if a coroutine), made once
        when a plugin first needs it: for what is costly to build or needs the event loop."""
        self._refuse_second(annotation)
        self._factories[annotation] = factory

    def _registered(self, annotation: Any) -> bool:
        return annotation in self._factories or annotation in self._values

    def _refuse_second(self, annotation: type) -> None:
        if self._registered(annotation):
            raise ValueError(f"{_name(annotation)} already has a provider")

    def can_provide(self, annotation: Any) -> bool:
        return (
            annotation in self._values or annotation in self._factories or _is_settings(annotation)
        )

    def describe(self) -> list[str]:
        """The provided type names, for error messages."""
        return [*sorted({_name(t) for t in (*self._values, *self._factories)}), "settings classes"]

    def prepare(self, annotation: Any) -> None:
        """Read an unregistered settings class now (start-up), so a bad environment fails the
        registry check rather than the first call; anything else is made on first use."""
        if _is_settings(annotation) and not self._registered(annotation):
            self._values[annotation] = annotation()

    async def get(self, annotation: type[T]) -> T:
        value = self._values.get(annotation, _MISSING)
        if value is not _MISSING:
            return cast(T, value)
        async with self._lock:
            if annotation in self._values:
                return cast(T, self._values[annotation])
            if annotation in self._factories:
                value = self._factories[annotation]()
                if inspect.isawaitable(value):
                    value = await value
            elif _is_settings(annotation):
                value = annotation()
            else:
                raise LookupError(f"nothing provides {_name(annotation)}")
            self._values[annotation] = value
            return cast(T, value)


def _is_settings(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseSettings)


def _name(annotation: Any) -> str:
    return getattr(annotation, "__qualname__", repr(annotation))
