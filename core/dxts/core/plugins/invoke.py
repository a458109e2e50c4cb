"""Invoking plugins: arguments validated, context bound, dependencies injected, output checked.

* Async plugins run on the event loop; sync ones off it, in the registry's executor.
* A feeder or packer is streamed (`stream`): an async generator is iterated directly; a sync
  one runs in one worker thread for its whole life (so thread-bound state in it stays valid)
  and hands items over one at a time through a bounded buffer, so a million-input generator
  never sits in memory. A sync packer reads its claimed inputs through a blocking iterator
  that fetches them from the async source in chunks of `INPUT_CHUNK`.
* Everything a plugin yields or returns is checked here, not by the runners: the type must be
  one the point accepts, a proposal the plugin built invalidly is an `InvalidArgument` naming
  the plugin and the field, and an exception the plugin raised is a `PluginFailed` naming it.
  Stop a stream early with `contextlib.aclosing(...)`: closing it stops the plugin.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import threading
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import ValidationError

from dxts.core.errors import DxtsError, FieldViolation, InvalidArgument
from dxts.core.plugins import proposals as p
from dxts.core.plugins.args import positional_fields, violations
from dxts.core.plugins.context import Transformation
from dxts.core.plugins.errors import PluginFailed, PluginRegistryError
from dxts.core.plugins.points import Phase, PluginKind, Point

if TYPE_CHECKING:
    from dxts.core.plugins.registry import Plugin, Registry

STREAM_BUFFER = 1024  # items a sync generator may run ahead of its consumer
INPUT_CHUNK = 256  # inputs a sync packer's iterator fetches from the async source at a time

YIELDS: dict[Point, tuple[type, ...]] = {
    Point.FEEDER: (p.Input, p.SetFeederState, p.NoMoreInputs),
    Point.PACKER: (p.ComputeParcel, p.DataParcel, p.BadInput, p.DelayInput),
}


async def call(
    registry: Registry, point: Point, name: str, args: Any, phase: Phase, context: dict[str, Any]
) -> Any:
    """Run a hook or an action once and return its checked result:

    * HandleFailedInput → ToUnassigned | ToProblematic | SplitInto | RetryWith | WriteOff;
    * TransformationActive → Operation | None;
    * WorkgraphActive → dict[UUID, Operation] (targets are members; None → {});
    * ScoutingToApproving → Accept | dict[UUID, Operation] (None → {}: keep scouting);
    * an action → ActionResult.

    Feeder arguments an Operation proposes are validated against the target's feeder for
    `phase` before they are returned, so a runner can apply them as they are.
    """
    if point in YIELDS:
        raise TypeError(f"a {point.kind} is streamed: use Registry.stream")
    plugin, kwargs = await _prepare(registry, point, name, args, phase, context)
    try:
        if inspect.iscoroutinefunction(plugin.function):
            result = await plugin.function(**kwargs)
        else:
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(
                registry.executor, functools.partial(plugin.function, **kwargs)
            )
    except Exception as error:
        raise _failure(plugin, error, "result") from error
    return _check_result(registry, plugin, point, result, phase, context)


async def stream(
    registry: Registry, point: Point, name: str, args: Any, phase: Phase, context: dict[str, Any]
) -> AsyncIterator[Any]:
    """Run a feeder (context: transformation, feeder_state) or a packer (context:
    transformation, inputs, flush, feeder_active, input_overview) and yield its proposals,
    each checked. `inputs` may be an async or a plain iterable of InputRecord."""
    if point not in YIELDS:
        raise TypeError(f"a {point.kind} returns one value: use Registry.call")
    plugin, kwargs = await _prepare(registry, point, name, args, phase, context)
    try:
        source = _source(registry, plugin, kwargs)
    except Exception as error:  # calling an async generator function binds its arguments
        raise _failure(plugin, error, "yield[0]") from error
    index = 0
    exhausted = False
    try:
        while True:
            try:
                item = await anext(source)
            except StopAsyncIteration:
                return
            except Exception as error:
                raise _failure(plugin, error, f"yield[{index}]") from error
            _check_item(plugin, point, index, item, exhausted)
            exhausted = exhausted or isinstance(item, p.NoMoreInputs)
            yield item
            index += 1
    finally:
        await source.aclose()


async def _prepare(
    registry: Registry, point: Point, name: str, args: Any, phase: Phase, context: dict[str, Any]
) -> tuple[Plugin, dict[str, Any]]:
    if set(context) != point.context:
        raise TypeError(
            f"the runner must pass exactly {sorted(point.context)} to a {point} plugin, "
            f"got {sorted(context)}"
        )
    model = registry.validate_args(
        point.kind, name, args, phase=phase, point=point, args_field=f"{point.kind}_args"
    )
    plugin = registry.get(point.kind, name)
    kwargs = {key: value for key, value in context.items() if key in plugin.declared}
    if "feeder_state" in kwargs and kwargs["feeder_state"] is None:
        kwargs["feeder_state"] = {}
    if plugin.args_parameter is not None:
        kwargs[plugin.args_parameter] = model
    if "scouting" in plugin.declared:
        kwargs["scouting"] = phase is Phase.SCOUTING
    for injection in plugin.injections:
        if registry.providers.can_provide(injection.annotation):
            kwargs[injection.parameter] = await registry.providers.get(injection.annotation)
        elif not injection.optional:  # Registry.check() was skipped at start-up
            raise PluginRegistryError(
                [f"{plugin.label}: nothing provides parameter {injection.parameter!r}"]
            )
    if "inputs" in kwargs:
        kwargs["inputs"] = _adapt_inputs(kwargs["inputs"], _is_async(plugin.function))
    return plugin, kwargs


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)


# ------------------------------------------------------------------------------- streaming


def _source(
    registry: Registry, plugin: Plugin, kwargs: dict[str, Any]
) -> AsyncGenerator[Any, None]:
    """What the plugin yields, as one async generator and without a relay per item: an async
    generator plugin as it is, a sync one through its thread, a coroutine through `_items`."""
    function = plugin.function
    if inspect.isasyncgenfunction(function):
        generator: AsyncGenerator[Any, None] = function(**kwargs)
        return generator
    if inspect.iscoroutinefunction(function):
        return _items(registry, function, kwargs)
    thread = _ThreadStream(functools.partial(function, **kwargs), registry.executor)
    return thread.__aiter__()


async def _items(
    registry: Registry, function: Callable[..., Any], kwargs: dict[str, Any]
) -> AsyncGenerator[Any, None]:
    """A coroutine plugin: what it returns, an async iterable or items for `_as_iterator`."""
    result = await function(**kwargs)
    if isinstance(result, AsyncIterable):
        async for item in result:
            yield item
        return
    async for item in _ThreadStream(lambda: result, registry.executor):
        yield item


class _ThreadStream:
    """Runs a sync producer in one worker thread and hands its items to the loop in order.

    Items go through a deque under one lock; the consumer takes everything queued at once and
    yields it without locking again, and the loop is woken only when the consumer is waiting
    for an item, so a consumer busy with a batch costs the producer nothing. The producer waits
    while STREAM_BUFFER items are ahead of the consumer (queued, or taken and not yet yielded),
    so a million-input generator never sits in memory. Stopping sets a flag under the lock: the
    thread notices when it next posts an item and closes the generator (in its own thread). A
    plugin blocked inside its own code cannot be interrupted; it stops after it next yields.
    """

    _END = object()

    def __init__(self, produce: Callable[[], Any], executor: Any) -> None:
        self._items: deque[Any] = deque()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._waiter: asyncio.Future[None] | None = None
        self._ahead = 0  # items posted and not yet yielded by the consumer
        self._stopped = False
        self._loop = asyncio.get_running_loop()
        self._loop.run_in_executor(executor, self._run, produce)

    def _post(self, message: Any, *, item: bool = True) -> bool:
        """Queue a message (an item waits for room; the end never does). False: stopped."""
        with self._lock:
            while item and self._ahead >= STREAM_BUFFER and not self._stopped:
                self._room.wait()
            if self._stopped:
                return False
            self._items.append(message)
            self._ahead += item
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            # A closed loop raises RuntimeError: nobody is waiting for the items any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(_wake, waiter)
        return True

    def _run(self, produce: Callable[[], Any]) -> None:
        try:
            items = _as_iterator(produce())
            try:
                for item in items:
                    if not self._post((True, item)):
                        return
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()
            self._post(self._END, item=False)
        except Exception as error:
            self._post((False, error), item=False)

    async def _take(self, yielded: int) -> deque[Any]:
        """Everything queued (waiting for something if need be), once the consumer has yielded
        `yielded` more items."""
        while True:
            with self._lock:
                self._ahead -= yielded
                yielded = 0
                self._room.notify()
                if self._items:
                    taken, self._items = self._items, deque()
                    return taken
                waiter = self._waiter = self._loop.create_future()
            await waiter

    async def __aiter__(self) -> AsyncGenerator[Any, None]:
        yielded = 0
        try:
            while True:
                messages = await self._take(yielded)
                for message in messages:
                    if message is self._END:
                        return
                    ok, value = message
                    if not ok:
                        raise value
                    yield value
                yielded = len(messages)  # all items: the end and an error come last
        finally:
            with self._lock:
                self._stopped = True
                self._room.notify()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _as_iterator(result: Any) -> Iterator[Any]:
    """What a plain function returned, as items: None is nothing, one proposal is one item."""
    if result is None:
        return iter(())
    if isinstance(result, Iterable) and not isinstance(result, str | bytes | Mapping):
        return iter(result)
    return iter((result,))


def _adapt_inputs(inputs: Any, for_async: bool) -> Any:
    """The claimed inputs in the shape the packer iterates: async for an async packer, a
    blocking iterator (fed from the loop in chunks) for a sync one running in a thread."""
    if for_async:
        return inputs if isinstance(inputs, AsyncIterable) else _async_iter(inputs)
    if isinstance(inputs, AsyncIterable):
        return _BlockingInputs(aiter(inputs), asyncio.get_running_loop())
    return iter(inputs)


async def _async_iter(items: Iterable[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


class _BlockingInputs(Iterator[Any]):
    """An async source read from a worker thread, INPUT_CHUNK items per trip to the loop."""

    def __init__(self, source: AsyncIterator[Any], loop: asyncio.AbstractEventLoop) -> None:
        self._source = source
        self._loop = loop
        self._buffer: deque[Any] = deque()
        self._exhausted = False

    def __next__(self) -> Any:
        if not self._buffer and not self._exhausted:
            chunk = asyncio.run_coroutine_threadsafe(self._take(), self._loop).result()
            self._exhausted = len(chunk) < INPUT_CHUNK
            self._buffer.extend(chunk)
        if not self._buffer:
            raise StopIteration
        return self._buffer.popleft()

    async def _take(self) -> list[Any]:
        chunk = []
        async for item in self._source:
            chunk.append(item)
            if len(chunk) == INPUT_CHUNK:
                break
        return chunk


# -------------------------------------------------------------------------------- checking


def _failure(plugin: Plugin, error: Exception, where: str) -> DxtsError:
    """A proposal the plugin built invalidly is bad input; anything else it raised (a domain
    error of an injected service included, kept as the cause) is a failure of the plugin."""
    if isinstance(error, ValidationError) and error.title in p.PROPOSAL_TYPES:
        fields = positional_fields(getattr(p, error.title))
        return InvalidArgument(
            [
                FieldViolation(
                    v.field,
                    f"{plugin.label} built an invalid {error.title} ({where}): {v.description}",
                )
                for v in violations(error, error.title, fields)
            ]
        )
    return PluginFailed(plugin.label, plugin.provider, error)


def _check_item(plugin: Plugin, point: Point, index: int, item: Any, exhausted: bool) -> None:
    allowed = YIELDS[point]
    if not isinstance(item, allowed):
        names = ", ".join(cls.__name__ for cls in allowed)
        raise InvalidArgument(
            f"{plugin.label} yielded a {type(item).__name__}; a {point.kind} yields {names}",
            field=f"yield[{index}]",
        )
    if exhausted and isinstance(item, p.Input):
        raise InvalidArgument(
            f"{plugin.label} yielded an input after NoMoreInputs", field=f"yield[{index}]"
        )


def _check_result(
    registry: Registry,
    plugin: Plugin,
    point: Point,
    result: Any,
    phase: Phase,
    context: dict[str, Any],
) -> Any:
    def refuse(expected: str) -> InvalidArgument:
        return InvalidArgument(
            f"{plugin.label} returned {type(result).__name__}; {point} expects {expected}",
            field="result",
        )

    if point.kind is PluginKind.ACTION:
        if not isinstance(result, p.ActionResult):
            raise refuse("an ActionResult")
        return result
    if point is Point.HANDLE_FAILED_INPUT:
        if not isinstance(
            result, p.ToUnassigned | p.ToProblematic | p.SplitInto | p.RetryWith | p.WriteOff
        ):
            raise refuse("ToUnassigned, ToProblematic, SplitInto, RetryWith or WriteOff")
        return result
    if point is Point.TRANSFORMATION_ACTIVE:
        if result is None:
            return None
        if not isinstance(result, p.Operation):
            raise refuse("an Operation or None")
        _check_operation(registry, plugin, context["transformation"], result, phase, "result")
        return result
    if point is Point.SCOUTING_TO_APPROVING and isinstance(result, p.Accept):
        return result
    if result is None:
        return {}
    expected = "Accept or a dict of transformation id to Operation"
    if not isinstance(result, Mapping):
        raise refuse(expected if point is Point.SCOUTING_TO_APPROVING else expected[10:])
    members = {member.id: member for member in context["transformations"]}
    operations = {}
    for key, operation in result.items():
        field = f"result[{key}]"
        target = _member(plugin, key, members, field)
        if not isinstance(operation, p.Operation):
            raise InvalidArgument(
                f"{plugin.label} proposed a {type(operation).__name__}, not an Operation",
                field=field,
            )
        _check_operation(registry, plugin, target, operation, phase, field)
        operations[target.id] = operation
    return operations


def _member(
    plugin: Plugin, key: Any, members: dict[UUID, Transformation], field: str
) -> Transformation:
    try:
        target = key if isinstance(key, UUID) else UUID(str(key))
    except ValueError:
        raise InvalidArgument(
            f"{plugin.label} keyed an operation by {key!r}", field=field
        ) from None
    if target not in members:
        raise InvalidArgument(
            f"{plugin.label} proposed an operation on {target}, which is not a member",
            field=field,
        )
    return members[target]


def _check_operation(
    registry: Registry,
    plugin: Plugin,
    target: Transformation,
    operation: p.Operation,
    phase: Phase,
    field: str,
) -> None:
    if operation.feeder_args is None:
        return
    if target.feeder is None:
        raise InvalidArgument(
            f"{plugin.label} proposed feeder arguments for {target.id}, which has no feeder",
            field=f"{field}.feeder_args",
        )
    registry.validate_args(
        PluginKind.FEEDER,
        target.feeder,
        operation.feeder_args,
        phase=phase,
        name_field=f"{field}.feeder",
        args_field=f"{field}.feeder_args",
    )
