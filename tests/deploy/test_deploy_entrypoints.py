"""Every command the chart runs is one of dxts's console entry points, pyproject declares each
of them, and each is installed in the environment the image is built from."""

from __future__ import annotations

import tomllib
from importlib.metadata import entry_points
from typing import Any

import pytest
from chart_render import ENTRY_POINTS, ROOT, containers, pod_specs

DECLARED = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("scripts", {}))


def commands(manifests: list[dict[str, Any]]) -> set[str]:
    """The program of every container running the dxts image."""
    found = set()
    for _, spec in pod_specs(manifests):
        for container in containers(spec):
            if "mariadb" in container["image"]:
                continue  # the trial database runs the official image's own entrypoint
            if container["name"] == "munged":
                continue  # the Slurm adaptor's munge sidecar: Debian's daemon, in the image
            argv = container.get("command") or container.get("args")
            assert argv, f"{container['name']} relies on the image's default command"
            found.add(argv[0])
    return found


def test_chart_runs_only_fixed_entry_points(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, manifests in rendered.items():
        assert commands(manifests) <= ENTRY_POINTS, name
    # The full value set runs every component's entry point and the migration command.
    assert commands(rendered["everything"]) == ENTRY_POINTS - {"dxts"}


@pytest.mark.parametrize("entry_point", sorted(ENTRY_POINTS))
def test_pyproject_declares_the_entry_point(entry_point: str) -> None:
    assert entry_point in DECLARED


def test_every_command_the_chart_runs_is_an_installed_console_script(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    installed = {entry.name for entry in entry_points(group="console_scripts")}
    for name, manifests in rendered.items():
        assert commands(manifests) <= DECLARED & installed, name
