"""The plugin registry: discovery through entry points, signature analysis, argument checks.

`Registry.discover()` loads the four entry-point groups (`dxts.feeders`, `dxts.packers`,
`dxts.hooks`, `dxts.actions`; the name in the group is the name a document uses), refuses
duplicate names naming both providers, and analyses every plugin's signature once: which
parameters the core fills (`Point.fixed`), which model the args parameter declares, and which
parameters are injected by annotation. `check()` then proves, at start-up, that every injected
annotation has a provider. Everything found wrong is reported together.

The definition side calls `validate_args` at submission; the runners call `call`/`stream`
(`dxts.core.plugins.invoke`), which validate the stored args again before every invocation.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import types
import typing
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from dxts.core.errors import FieldViolation, InvalidArgument, NotFound
from dxts.core.plugins import invoke
from dxts.core.plugins.args import NoArgs, validate_model
from dxts.core.plugins.errors import PluginRegistryError
from dxts.core.plugins.points import POINTS_ATTRIBUTE, Phase, PluginKind, Point
from dxts.core.plugins.providers import Providers

NAME_MAX = 64  # Transformations.Feeder/Packer, Actions.Action: VARCHAR(64)

_CALLABLE = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True)
class Injection:
    """A parameter the core fills from the providers by its annotation."""

    parameter: str
    annotation: Any
    default: Any = inspect.Parameter.empty

    @property
    def optional(self) -> bool:
        return self.default is not inspect.Parameter.empty


@dataclass(frozen=True)
class Plugin:
    """One registered plugin, analysed once at start-up."""

    kind: PluginKind
    name: str
    function: Callable[..., Any]
    provider: str  # "distribution version (module:attribute)", for messages
    points: frozenset[Point]
    args_model: type[BaseModel]
    args_parameter: str | None  # None: the plugin takes no args (NoArgs refuses any)
    declared: frozenset[str]  # the fixed parameters it asks for
    injections: tuple[Injection, ...]

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name!r}"


def analyse(
    kind: PluginKind, name: str, function: Any, provider: str
) -> tuple[Plugin | None, list[str]]:
    """Read a plugin's signature: the plugin, or the problems that make it unusable."""
    where = f"{kind} {name!r} ({provider})"
    problems = []
    if not name or len(name) > NAME_MAX or name != name.strip() or " " in name:
        problems.append(f"{where}: a plugin name is 1-{NAME_MAX} characters without spaces")
    if not callable(function):
        return None, [*problems, f"{where}: {function!r} is not callable"]
    points = _points(kind, function)
    if not points:
        decorator = "hook" if kind is PluginKind.HOOK else "action"
        problems.append(
            f"{where}: says no {kind} point; decorate it with dxts.core.plugins.{decorator}(...)"
        )
        return None, problems
    if kind in (PluginKind.HOOK, PluginKind.ACTION) and (
        inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function)
    ):
        problems.append(f"{where}: a {kind} returns one value; it cannot be a generator")
    try:
        hints = typing.get_type_hints(function)
        signature = inspect.signature(function)
    except Exception as error:
        return None, [*problems, f"{where}: cannot read its signature: {error}"]
    args_parameter = next(iter(points)).args_parameter
    fixed = frozenset().union(*(point.fixed for point in points))
    args_model: type[BaseModel] = NoArgs
    declared = set()
    injections = []
    for parameter in signature.parameters.values():
        if parameter.kind not in _CALLABLE:
            problems.append(f"{where}: parameter {parameter.name!r} must be passable by keyword")
            continue
        annotation = hints.get(parameter.name, inspect.Parameter.empty)
        if parameter.name == args_parameter:
            found = _args_problem(annotation)
            if found:
                problems.append(f"{where}: {args_parameter} {found}")
            else:
                args_model = annotation
            declared.add(parameter.name)
        elif parameter.name in fixed:
            declared.add(parameter.name)
        elif annotation is inspect.Parameter.empty and parameter.default is parameter.empty:
            problems.append(
                f"{where}: parameter {parameter.name!r} is not one the core passes to a {kind} "
                f"({', '.join(sorted(fixed))}) and has no annotation to inject by"
            )
        elif annotation is not inspect.Parameter.empty:
            injections.append(Injection(parameter.name, _required(annotation), parameter.default))
    if problems:
        return None, problems
    plugin = Plugin(
        kind=kind,
        name=name,
        function=function,
        provider=provider,
        points=points,
        args_model=args_model,
        args_parameter=args_parameter if args_parameter in declared else None,
        declared=frozenset(declared),
        injections=tuple(injections),
    )
    return plugin, []


def _points(kind: PluginKind, function: Any) -> frozenset[Point]:
    if kind is PluginKind.FEEDER:
        return frozenset({Point.FEEDER})
    if kind is PluginKind.PACKER:
        return frozenset({Point.PACKER})
    points: frozenset[Point] = getattr(function, POINTS_ATTRIBUTE, frozenset())
    return frozenset(point for point in points if point.kind is kind)


def _args_problem(annotation: Any) -> str | None:
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return f"must be annotated with a pydantic model, not {annotation!r}"
    if annotation.model_config.get("extra", "ignore") == "ignore":
        return (
            f"model {annotation.__qualname__} silently ignores unknown keys, so a misspelt "
            "argument would pass submission: derive it from dxts.core.plugins.PluginArgs or "
            "set extra='forbid' (or 'allow', deliberately)"
        )
    return None


def _required(annotation: Any) -> Any:
    """`X | None` → X: an optional dependency is injected when provided, else its default."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def describe_entry_point(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    where = f"({entry_point.value})"
    return f"{dist.name} {dist.version} {where}" if dist is not None else where


class Registry:
    """Every plugin of this installation, by kind and name, plus what injection can supply."""

    def __init__(
        self,
        plugins: Iterable[Plugin],
        *,
        providers: Providers | None = None,
        executor: Executor | None = None,
        problems: Iterable[str] = (),
    ) -> None:
        """Build from analysed plugins; `executor` runs sync plugins (None: the loop default)."""
        found = list(problems)
        self._plugins: dict[tuple[PluginKind, str], Plugin] = {}
        for plugin in plugins:
            key = (plugin.kind, plugin.name)
            if key in self._plugins:
                first = self._plugins[key]
                found.append(
                    f"{plugin.label} is registered twice: by {first.provider} and by "
                    f"{plugin.provider}; uninstall one or rename it"
                )
            else:
                self._plugins[key] = plugin
        if found:
            raise PluginRegistryError(found)
        self.providers = providers or Providers()
        self.executor = executor

    @classmethod
    def discover(
        cls,
        *,
        providers: Providers | None = None,
        executor: Executor | None = None,
        entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    ) -> Registry:
        """Load every plugin the installed distributions register (or `entry_points`)."""
        if entry_points is None:
            entry_points = [
                ep
                for kind in PluginKind
                for ep in importlib.metadata.entry_points(group=kind.group)
            ]
        kinds = {kind.group: kind for kind in PluginKind}
        plugins, problems = [], []
        for entry_point in entry_points:
            kind = kinds.get(entry_point.group)
            if kind is None:
                continue
            provider = describe_entry_point(entry_point)
            try:
                function = entry_point.load()
            except Exception as error:
                problems.append(
                    f"{kind} {entry_point.name!r} ({provider}) cannot be loaded: "
                    f"{type(error).__name__}: {error}"
                )
                continue
            plugin, found = analyse(kind, entry_point.name, function, provider)
            problems.extend(found)
            if plugin is not None:
                plugins.append(plugin)
        return cls(plugins, providers=providers, executor=executor, problems=problems)

    @classmethod
    def of(
        cls,
        functions: Mapping[PluginKind | str, Mapping[str, Callable[..., Any]]],
        *,
        providers: Providers | None = None,
        executor: Executor | None = None,
    ) -> Registry:
        """A registry of the given functions, without entry points (tests, embedding)."""
        plugins, problems = [], []
        for kind, named in functions.items():
            for name, function in named.items():
                module = getattr(function, "__module__", "?")
                where = f"{module}:{getattr(function, '__qualname__', repr(function))}"
                plugin, found = analyse(PluginKind(kind), name, function, f"({where})")
                problems.extend(found)
                if plugin is not None:
                    plugins.append(plugin)
        return cls(plugins, providers=providers, executor=executor, problems=problems)

    def __iter__(self) -> Iterator[Plugin]:
        return iter(self._plugins.values())

    def __len__(self) -> int:
        return len(self._plugins)

    def names(self, kind: PluginKind | str) -> list[str]:
        kind = PluginKind(kind)
        return sorted(name for k, name in self._plugins if k is kind)

    def get(self, kind: PluginKind | str, name: str) -> Plugin:
        """The plugin of `kind` called `name`; NotFound if no installed package registers it."""
        plugin = self._plugins.get((PluginKind(kind), name))
        if plugin is None:
            raise NotFound(str(kind), name)
        return plugin

    def check(self) -> None:
        """Prove at start-up that every plugin can be called: each injected annotation has a
        provider (settings classes are read from the environment now). Raises
        PluginRegistryError listing every parameter that cannot be satisfied."""
        problems = []
        for plugin in self:
            for injection in plugin.injections:
                annotation = injection.annotation
                where = f"{plugin.label} ({plugin.provider}): parameter {injection.parameter!r}"
                if not self.providers.can_provide(annotation):
                    if not injection.optional:
                        type_name = getattr(annotation, "__qualname__", repr(annotation))
                        problems.append(
                            f"{where} is annotated {type_name}, which nothing provides "
                            f"(provided: {', '.join(self.providers.describe())})"
                        )
                    continue
                try:
                    self.providers.prepare(annotation)
                except (ValidationError, ValueError) as error:
                    problems.append(f"{where}: {annotation.__qualname__} is invalid: {error}")
        if problems:
            raise PluginRegistryError(problems)

    def validate_args(
        self,
        kind: PluginKind | str,
        name: Any,
        args: Any,
        *,
        phase: Phase | str,
        point: Point | str | None = None,
        name_field: str = "name",
        args_field: str = "args",
    ) -> BaseModel:
        """`args` validated against the named plugin's model for `phase`; InvalidArgument with
        field paths (under `name_field`/`args_field`) for an unknown name, a plugin that does
        not serve `point`, or arguments the model or the plugin's phase rule refuses.

        At submission, validate each binding for every phase it will run in: a feeder of a
        member that runs during the scout is validated for "scouting" and for "active".
        """
        kind = PluginKind(kind)
        if not isinstance(name, str):
            raise InvalidArgument(f"a {kind} name is a string, got {name!r}", field=name_field)
        try:
            plugin = self.get(kind, name)
        except NotFound:
            known = ", ".join(self.names(kind)) or "none"
            raise InvalidArgument(
                f"no {kind} named {name!r} is installed (installed {kind}s: {known})",
                field=name_field,
            ) from None
        if point is not None and Point(point) not in plugin.points:
            serves = ", ".join(sorted(plugin.points))
            raise InvalidArgument(
                FieldViolation(
                    name_field, f"{plugin.label} serves {serves}, it cannot be bound as {point}"
                )
            )
        return validate_model(plugin.args_model, args, phase=Phase(phase), field=args_field)

    async def call(
        self, point: Point | str, name: str, args: Any, *, phase: Phase | str, **context: Any
    ) -> Any:
        """Run a hook or an action once; see `dxts.core.plugins.invoke.call`."""
        return await invoke.call(self, Point(point), name, args, Phase(phase), context)

    def stream(
        self, point: Point | str, name: str, args: Any, *, phase: Phase | str, **context: Any
    ) -> AsyncIterator[Any]:
        """Run a feeder or a packer, streaming its proposals; see `invoke.stream`."""
        return invoke.stream(self, Point(point), name, args, Phase(phase), context)
