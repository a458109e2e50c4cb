"""`dxts up --data-dir X` is found by the other commands (it records X in ~/.dxts/current while
it runs), and the "no address" error names the ways to point at the services."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dxts.cli.connection import (
    CONNECTION_FILE,
    Connection,
    forget_current,
    record_current,
    running_data_dir,
)
from dxts.cli.main import app


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for variable in ("DXTS_DATA_DIR", "DXTS_DEFINITION_ADDRESS", "DXTS_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path / "home"


def started_up(directory: Path) -> Path:
    """What `dxts up --data-dir directory` leaves while it runs."""
    directory.mkdir(parents=True)
    Connection(definition="127.0.0.1:1234").write(directory / CONNECTION_FILE)
    record_current(directory)
    return directory


def test_the_commands_find_the_running_dxts_up(tmp_path: Path, home: Path) -> None:
    running = started_up(tmp_path / "elsewhere")
    assert running_data_dir() == running
    assert Connection.resolve({}, running_data_dir()).definition == "127.0.0.1:1234"


def test_the_option_and_the_variable_come_first(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started_up(tmp_path / "elsewhere")
    assert running_data_dir(tmp_path / "chosen") == tmp_path / "chosen"
    monkeypatch.setenv("DXTS_DATA_DIR", str(tmp_path / "variable"))
    assert running_data_dir() == tmp_path / "variable"


def test_a_stopped_dxts_up_is_forgotten(tmp_path: Path, home: Path) -> None:
    running = started_up(tmp_path / "elsewhere")
    forget_current(running)
    assert running_data_dir() == home / ".dxts"
    # A record left by a crash names a directory without a connection file: not used.
    record_current(running)
    (running / CONNECTION_FILE).unlink()
    assert running_data_dir() == home / ".dxts"


def test_forget_leaves_another_dxts_ups_record(tmp_path: Path) -> None:
    first = started_up(tmp_path / "first")
    second = started_up(tmp_path / "second")
    forget_current(first)
    assert running_data_dir() == second


def test_no_address_names_every_way_to_give_one(home: Path) -> None:
    result = CliRunner().invoke(app, ["list"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: no address for the definition service (no {home / '.dxts' / CONNECTION_FILE}):"
        " start `dxts up`, point at its data directory with --data-dir or DXTS_DATA_DIR, or "
        "give the address with --definition or DXTS_DEFINITION_ADDRESS\n"
    )
