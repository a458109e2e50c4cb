"""The defects of issue 18 (point 3), each once, with no service running."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import write_document
from typer.testing import CliRunner

from dxts.cli.main import app
from dxts.core.errors import InvalidArgument
from dxts.core.migrations.cli import app as db_app
from dxts.core.settings import async_database_url

runner = CliRunner()
# A port nothing listens on: the verbs fail there, after reading their input.
NOWHERE = [
    "--definition",
    "127.0.0.1:1",
    "--execution",
    "127.0.0.1:1",
    "--accounting",
    "127.0.0.1:1",
]


def test_an_empty_document_is_an_error_for_validate(tmp_path: Path) -> None:
    empty = tmp_path / "empty.cwl"
    empty.write_text("")
    result = runner.invoke(app, ["validate", str(empty)])
    assert result.exit_code == 1
    assert result.stdout == (
        "error  invalid-cwl  .  empty.cwl: is empty\nempty.cwl: 1 error, not accepted\n"
    )


def test_validate_names_a_missing_file_as_such(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(tmp_path / "missing.cwl")])
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'missing.cwl'}: no such file\n"
    assert "bundle" not in result.output


def test_submit_reports_a_yaml_syntax_error_on_one_line_with_where(tmp_path: Path) -> None:
    document = write_document(tmp_path, "steps: {a: b: c}\n")
    result = runner.invoke(app, [*NOWHERE, "submit", str(document)])
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    # The loader's problem line, as `dxts validate` and the server give it: file, line, column.
    assert line.startswith("error  invalid-cwl  .  workgraph.cwl: line 11, column 13: ")
    assert "not YAML or JSON: " in line


def test_submit_of_a_missing_file_says_no_such_file(tmp_path: Path) -> None:
    result = runner.invoke(app, [*NOWHERE, "submit", str(tmp_path / "missing.cwl")])
    assert result.exit_code == 1
    assert result.stderr == f"error  missing.cwl  no such file: {tmp_path / 'missing.cwl'}\n"


@pytest.mark.parametrize(
    ("typed", "used"),
    [
        ("mysql://root@db:3306/dxts", "mysql+asyncmy://root@db:3306/dxts"),
        ("mariadb://u:pw@db/dxts", "mysql+asyncmy://u:pw@db/dxts"),
        ("mysql+asyncmy://root@db/dxts", "mysql+asyncmy://root@db/dxts"),
        ("sqlite:///x.sqlite", "sqlite+aiosqlite:///x.sqlite"),
        ("sqlite+aiosqlite:///x.sqlite", "sqlite+aiosqlite:///x.sqlite"),
    ],
)
def test_a_database_url_gets_the_async_driver(typed: str, used: str) -> None:
    assert async_database_url(typed) == used


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("nonsense", "is not a database URL"),
        ("postgresql://db/dxts", "unsupported database 'postgresql'"),
        ("mysql+pymysql://db/dxts", "the driver 'pymysql' is not asynchronous"),
    ],
)
def test_a_database_url_dxts_cannot_use_is_one_clear_error(url: str, said: str) -> None:
    with pytest.raises(InvalidArgument, match=said):
        async_database_url(url)


def test_dxts_up_refuses_a_bad_db_url_in_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["up", "--data-dir", str(tmp_path), "--db-url", "pg://x"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --db-url: unsupported database 'pg': dxts runs on MariaDB/MySQL or SQLite\n"
    )


def test_dxts_db_takes_the_mysql_url_a_mariadb_user_types() -> None:
    """`mysql://` reaches the server through asyncmy (no MySQLdb traceback): the database
    named does not exist, which is the one line printed."""
    result = runner.invoke(db_app, ["current", "--url", "mysql://root@127.0.0.1:3306/no_such_db"])
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert "MySQLdb" not in line and "Traceback" not in result.output
    assert line.startswith("dxts-db: error: ")
