"""The connection file holds a credential: it exists only ever as 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dxts.cli.client import CONNECTION_FILE, Connection


def test_the_connection_file_is_created_0600_even_with_an_open_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    real_replace = Path.replace

    def replace(self: Path, target: str | os.PathLike[str]) -> Path:
        # The moment before the file takes its name: its mode is already final.
        seen.append(stat.S_IMODE(self.stat().st_mode))
        return real_replace(self, target)

    def chmod(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was created readable by others, then chmod'ed")

    monkeypatch.setattr(Path, "replace", replace)
    monkeypatch.setattr(os, "chmod", chmod)
    monkeypatch.setattr(Path, "chmod", chmod)
    previous = os.umask(0)
    try:
        Connection(definition="127.0.0.1:1", token="secret").write(tmp_path / CONNECTION_FILE)
    finally:
        os.umask(previous)
    assert seen == [0o600]
    assert stat.S_IMODE((tmp_path / CONNECTION_FILE).stat().st_mode) == 0o600
    assert Connection.resolve({}, tmp_path).token == "secret"
