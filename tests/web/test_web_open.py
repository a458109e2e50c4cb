"""`dxts open` where there is no web view to ask: one clear line, a failing status."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dxts.cli.main import app
from dxts.core.grpc.ports import free_port


def test_without_a_web_view_it_says_how_to_get_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--data-dir", str(tmp_path), "open", "WG", "--no-browser"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: no web view known: start `dxts up`, or set DXTS_WEB_URL and DXTS_TOKEN"
    )


def test_an_unreachable_web_view_is_one_line(tmp_path: Path) -> None:
    web = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    result = CliRunner().invoke(
        app,
        ["--data-dir", str(tmp_path), "--token", "t", "open", "WG", "--no-browser"],
        env={"DXTS_WEB_URL": web},
    )
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot reach the web view at {web}")
    assert len(result.stderr.splitlines()) == 1


def test_the_demo_prints_the_link_to_the_workgraphs_page() -> None:
    script = (Path(__file__).parents[2] / "scripts" / "demo").read_text()
    assert '"$dxts" open "$workgraph" --no-browser' in script
