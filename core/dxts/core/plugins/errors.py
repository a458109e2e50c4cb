"""The two ways plugins fail: the installation is inconsistent, or one invocation raised."""

from __future__ import annotations

from collections.abc import Sequence

from dxts.core.errors import DxtsError


class PluginRegistryError(DxtsError):
    """The installed plugins cannot be used as they are: the process refuses to start.

    Lists every problem found (duplicate names with both providers, plugins that fail to load,
    signatures the core cannot call, annotations nothing provides), not only the first.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            "the installed dxts plugins cannot be used:\n"
            + "\n".join(f"  - {problem}" for problem in self.problems)
        )


class PluginFailed(DxtsError):
    """A plugin raised: a task failure, retried by the next sweep, never an entity state.

    The plugin's own exception is the `__cause__`; nothing it proposed before raising in the
    same invocation has been written unless the runner already committed it.
    """

    def __init__(self, label: str, provider: str, error: BaseException) -> None:
        self.label = label
        self.provider = provider
        super().__init__(f"{label} ({provider}) raised {type(error).__name__}: {error}")
