"""Rendering the chart: the helm binary scripts/fetch-tools caches, the value sets the checks
run over, and small accessors over the rendered manifests (no cluster needed)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "dxts"
VALUES = Path(__file__).resolve().parent / "values"
RELEASE = "dx"
NAMESPACE = "dxts"

# The console entry points the image and the chart are built against (fixed by the deployment
# issue; pyproject.toml [project.scripts] declares them).
ENTRY_POINTS = {
    "dxts-definition",
    "dxts-execution",
    "dxts-accounting",
    "dxts-dispatcher",
    "dxts-backend-local",
    "dxts-backend-null",
    "dxts-backend-slurm",
    "dxts-db",
    "dxts",
}

# The value sets every check runs over: the chart's defaults and the files under values/.
VALUE_SETS = {
    "default": [],
    "external-db": [VALUES / "external-db.yaml"],
    "everything": [VALUES / "everything.yaml"],
    "galera": [VALUES / "galera.yaml"],
}


@dataclass(frozen=True)
class Helm:
    binary: str

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args], cwd=ROOT, capture_output=True, text=True, check=False
        )

    def template(self, values: list[Path], *extra: str) -> subprocess.CompletedProcess[str]:
        files = [arg for path in values for arg in ("--values", str(path))]
        return self.run("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *files, *extra)

    def render(self, values: list[Path], *extra: str) -> list[dict[str, Any]]:
        """The manifests `helm template` renders (hooks included); fails the test on error."""
        result = self.template(values, *extra)
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def helm_binary() -> str | None:
    """.tools/bin/helm, fetched by scripts/fetch-tools when missing; None if that failed."""
    local = ROOT / ".tools" / "bin" / "helm"
    if not local.exists():
        subprocess.run([str(ROOT / "scripts" / "fetch-tools")], cwd=ROOT, check=False)
    return str(local) if local.exists() else None


def pod_specs(manifests: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(object, pod spec) for every object that runs pods."""
    for doc in manifests:
        if doc["kind"] in {"Deployment", "StatefulSet", "Job"}:
            yield doc, doc["spec"]["template"]["spec"]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def of_kind(manifests: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in manifests if doc["kind"] == kind}
