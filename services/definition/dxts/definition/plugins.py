"""The plugin catalogue as validation sees it: is a name registered, are these args valid.

The entry-point registry lives in `dxts.core.plugins`; validation depends only on this small
protocol so that it runs the same against the registry, against a test's catalogue, and offline
with nothing registered at all (`allow_unknown_plugins` then turns unknown names into warnings).
"""

from __future__ import annotations

from typing import Any, Protocol

from dxts.core.plugins.points import Phase, PluginKind


class PluginCatalogue(Protocol):
    def is_registered(self, kind: PluginKind, name: str) -> bool:
        """Whether a `kind` plugin called `name` is installed."""

    def validate_args(self, kind: PluginKind, name: str, args: Any, *, phase: Phase) -> None:
        """Raise InvalidArgument if `args` are invalid for the plugin in `phase`; violation
        fields are relative to the binding (`args.group_size`)."""


class EmptyCatalogue:
    """Knows no plugin: every name is unknown (an offline check with nothing installed)."""

    def is_registered(self, kind: PluginKind, name: str) -> bool:
        return False

    def validate_args(self, kind: PluginKind, name: str, args: Any, *, phase: Phase) -> None:
        raise AssertionError("validate_args called for a plugin the catalogue does not know")
