"""What every part of the sweep shares: the database, the plugins, the peers, and how a plugin
failure is reported.

A plugin that raises (or proposes something invalid, or is not installed) is a task failure,
never an entity state: it is logged, counted (`dxts_lifecycle_plugin_failures_
total`), written once to the owner's log (`PluginFailed`, again only when the message changes,
so a plugin failing on every sweep does not flood the log), and the step is retried by the next
sweep. A peer that is unavailable is reported the same way, without the log row.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from dxts.core.db import Database, Isolation
from dxts.core.errors import DxtsError, Unavailable
from dxts.core.ids import id_to_str
from dxts.core.logs import LogEntry, log_transformations, log_workgraphs
from dxts.core.plugins.points import Phase, Point
from dxts.core.plugins.protocols.lifecycle import Counts
from dxts.core.plugins.registry import Registry
from dxts.core.policy import Policy
from dxts.definition.logic.execution import LifecycleControl
from dxts.definition.logic.lifecycle.views import AUTHOR
from dxts.definition.settings import LifecycleSettings

log = logging.getLogger(__name__)

PLUGIN_FAILURES = Counter(
    "dxts_lifecycle_plugin_failures_total",
    "Hook and action invocations of the lifecycle sweep that failed, by extension point",
    ["point"],
)
PLUGIN_FAILED = "PluginFailed"


@dataclass(frozen=True)
class Owner:
    """Whose log a failure goes to: a workgraph, or a transformation."""

    workgraph_id: bytes | None = None
    transformation_id: bytes | None = None

    def __str__(self) -> str:
        if self.transformation_id is not None:
            return f"transformation {id_to_str(self.transformation_id)}"
        assert self.workgraph_id is not None
        return f"workgraph {id_to_str(self.workgraph_id)}"


def binding(hooks: Any, key: str) -> tuple[str, Any] | None:
    """(plugin name, args) of a Hooks-column binding, or None when there is none."""
    found = hooks.get(key) if isinstance(hooks, Mapping) else None
    if not isinstance(found, Mapping) or not isinstance(found.get("hook"), str):
        return None
    return found["hook"], found.get("args")


def hook_author(name: str) -> str:
    return f"hook {name}"[:64]


@dataclass
class Engine:
    database: Database
    registry: Registry
    counts: Counts
    control: LifecycleControl
    settings: LifecycleSettings
    # The installation's policy: what an action's requirements are held to (`actions_runner`).
    policy: Policy = field(default_factory=Policy)
    _reported: dict[tuple[Owner, str], str] = field(default_factory=dict)

    async def call(
        self,
        owner: Owner,
        point: Point,
        name: str,
        args: Any,
        *,
        phase: Phase,
        **context: Any,
    ) -> tuple[bool, Any]:
        """(True, result) of one hook or action invocation; (False, None) when it failed, which
        is reported here."""
        what = f"{point} {name}"
        try:
            result = await self.registry.call(point, name, args, phase=phase, **context)
        except DxtsError as error:
            await self.report(owner, what, error)
            return False, None
        self._reported.pop((owner, what), None)
        return True, result

    async def report(self, owner: Owner, what: str, error: Exception) -> None:
        """Log a failed step of `owner`; the owner's log gets a row when the message is new."""
        PLUGIN_FAILURES.labels(what.split(" ", 1)[0]).inc()
        message = f"{what}: {error}"
        log.warning("lifecycle of %s: %s", owner, message)
        if isinstance(error, Unavailable) or self._reported.get((owner, what)) == message:
            return
        self._reported[(owner, what)] = message

        async def work(conn: Any) -> None:
            if owner.transformation_id is not None:
                entry = LogEntry(owner.transformation_id, PLUGIN_FAILED, AUTHOR, message=message)
                await log_transformations(conn, [entry])
            else:
                assert owner.workgraph_id is not None
                entry = LogEntry(owner.workgraph_id, PLUGIN_FAILED, AUTHOR, message=message)
                await log_workgraphs(conn, [entry])

        await self.database.run(work, isolation=Isolation.READ_COMMITTED)
