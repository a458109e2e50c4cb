"""Hostile documents in the `dxts` command: `dxts validate` and `dxts submit` refuse each with
the same one line, naming the limit and the file, at once; the bundle `dxts submit` builds
never follows a symlink out of its directory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from cli_support import Dxts, write_document
from hostile import BY_LIMIT, LIMITS
from typer.testing import CliRunner

from dxts.cli.main import app


def validate(*args: str) -> tuple[int, list[str]]:
    """The exit status and the problems printed (the verdict line after them aside)."""
    result = CliRunner().invoke(app, ["validate", *args])
    return result.exit_code, result.output.splitlines()[:-1]


@pytest.mark.parametrize("limit", sorted(BY_LIMIT))
async def test_validate_and_submit_print_the_same_line_naming_the_limit(
    dxts: Dxts, tmp_path: Path, limit: str
) -> None:
    document = tmp_path / "hostile.cwl"
    document.write_text(BY_LIMIT[limit])
    started = time.perf_counter()
    code, (line,) = validate(str(document))
    assert time.perf_counter() - started < 5  # a hang was the finding; the bound is loose
    assert code == 1
    assert line.startswith("error  document-limit  .  hostile.cwl: ")
    assert line.endswith(f"document_limits.{limit} = {getattr(LIMITS, limit)}")
    submitted = await dxts("submit", str(document))
    assert submitted.exit_code == 1
    assert submitted.stdout == ""
    assert submitted.stderr.splitlines() == [line]


async def test_submit_refuses_a_symlink_out_of_the_bundle_as_validate_does(
    dxts: Dxts, tmp_path: Path
) -> None:
    document = write_document(
        tmp_path / "bundle",
        """
        steps:
          sim:
            hints: {dirac:Transformation: {}}
            run: tools/escape.cwl
            in: {seed: events}
            out: [sim-files]
        """,
    )
    secret = tmp_path / "secret.cwl"
    secret.write_text((tmp_path / "bundle" / "tools" / "simulate.cwl").read_text())
    (tmp_path / "bundle" / "tools" / "escape.cwl").symlink_to(secret)
    code, lines = validate(str(document))
    assert code == 1
    refused = (
        "error  unresolved-run  steps.sim.run  tools/escape.cwl is not in the submitted bundle"
    )
    # validate also says where: the line and column of steps.sim.run in the document.
    assert any(line.startswith(f"{refused}  (line ") for line in lines), lines
    submitted = await dxts("submit", str(document))
    assert submitted.exit_code == 1
    assert refused in submitted.stderr.splitlines()


async def test_the_limits_are_the_installation_files(
    dxts: Dxts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "dxts.yaml"
    config.write_text(yaml.safe_dump({"document_limits": {"max_depth": 3}}))
    monkeypatch.setenv("DXTS_CONFIG_FILE", str(config))
    document = write_document(tmp_path, "steps: {}\n")
    code, lines = validate(str(document))
    assert code == 1
    refused = (
        "error  document-limit  .  workgraph.cwl: nested deeper than the limit "
        "document_limits.max_depth = 3"
    )
    assert refused in lines
    submitted = await dxts("submit", str(document))
    assert submitted.exit_code == 1
    assert submitted.stderr.splitlines() == [refused]
