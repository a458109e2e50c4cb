"""The image as the chart expects it (no Docker engine here, so the Dockerfile is read): a fixed
non-root user matching the chart's securityContext, every entry point checked at build time,
and a build context without local state."""

from __future__ import annotations

import re

import yaml
from chart_render import CHART, ENTRY_POINTS, ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def final_stage() -> str:
    return DOCKERFILE.rsplit("\nFROM ", 1)[1]


def test_multi_stage_on_slim_python_3_11() -> None:
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", DOCKERFILE, re.M)
    assert len(re.findall(r"^FROM ", DOCKERFILE, re.M)) == 2
    assert "pip wheel" in DOCKERFILE.split("\nFROM ")[1]
    stage = final_stage()
    assert "build-essential" not in stage
    assert "--no-index" in stage
    assert "rm -rf /var/lib/apt/lists/*" in stage
    assert "PIP_NO_CACHE_DIR=1" in stage


def test_final_user_is_the_fixed_uid_the_chart_runs_as() -> None:
    stage = final_stage()
    declared = re.search(r"^ARG DXTS_UID=(\d+)$", stage, re.M)
    assert declared
    uid = int(declared.group(1))
    assert uid != 0
    assert re.search(r"^USER \$\{DXTS_UID\}:\$\{DXTS_UID\}$", stage, re.M)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == uid
    assert values["securityContext"]["runAsUser"] == uid


def test_build_checks_every_entry_point_and_the_cwl_runtime() -> None:
    loop = re.search(r"for command in (.*?); do", final_stage(), re.S)
    assert loop
    checked = set(loop.group(1).replace("\\", " ").split())
    assert checked == ENTRY_POINTS | {"cwltool", "node", "sbatch", "munged"}
    assert "nodejs" in final_stage()
    assert "slurm-client munge" in final_stage()  # the Slurm adaptor's tools


def test_build_context_leaves_out_local_state() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", ".tools", "tests", "**/__pycache__"} <= ignored
    # What the wheel build needs must stay in the context.
    kept = {"pyproject.toml", "setup.py", "README.md", "core", "protos", "services"}
    assert not kept & ignored
