"""`dxts open` where there is no web view to ask: one clear line, a failing status (an
unreachable one, and a name naming nothing: tests/cli/test_cli_names.py)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dxts.cli.main import app


def test_without_a_web_view_it_says_how_to_get_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--data-dir", str(tmp_path), "open", "WG", "--no-browser"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: no web view known: start `dxts up`, or set DXTS_WEB_URL and DXTS_TOKEN"
    )


def test_the_demo_prints_the_link_to_the_workgraphs_page() -> None:
    script = (Path(__file__).parents[2] / "scripts" / "demo").read_text()
    assert '"$dxts" open "$workgraph" --no-browser' in script
