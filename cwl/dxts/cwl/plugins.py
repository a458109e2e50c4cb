"""The plugin catalogue as validation sees it: the part of `dxts.core.plugins.Registry` it uses.

Validation depends only on this protocol, so it runs the same against the entry-point registry
and against a test's registry.
"""

from __future__ import annotations

from typing import Any, Protocol

from dxts.core.plugins.points import Phase, PluginKind, Point


class PluginCatalogue(Protocol):
    def get(self, kind: PluginKind, name: str) -> Any:
        """The plugin; NotFound when no installed package registers it."""

    def validate_args(
        self,
        kind: PluginKind,
        name: Any,
        args: Any,
        *,
        phase: Phase,
        point: Point | None = None,
        name_field: str = "name",
        args_field: str = "args",
    ) -> Any:
        """Raise InvalidArgument (fields under `name_field`/`args_field`) if the plugin cannot
        be bound at `point` or `args` are invalid for it in `phase`."""
