"""The multi-process cluster: every component from its console script, healthy, restartable."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from dxts.bench import cluster as cluster_module
from dxts.bench.cluster import Backend, ComponentFailed, LocalCluster
from dxts.core.grpc.ports import free_port


def test_every_component_runs_as_its_own_process_with_only_its_settings(
    db_url: str, tmp_path: Path
) -> None:
    with LocalCluster(tmp_path, db_url=db_url, backends=[Backend("null")]) as cluster:
        assert set(cluster.addresses) == {
            "definition",
            "execution",
            "accounting",
            "dispatcher",
            "backend-null",
        }
        pids = {name: c.process.pid for name, c in cluster.components.items() if c.process}
        assert len(set(pids.values())) == 5
        # Only the services know the database; only the callers know their peers.
        assert "DXTS_DB_URL" not in cluster.components["backend-null"].env
        assert "DXTS_DEFINITION_ADDRESS" not in cluster.components["definition"].env
        assert "DXTS_SERVICE_TOKEN_FILE" not in cluster.components["accounting"].env
        cluster.kill("execution")
        assert not cluster.components["execution"].running
        cluster.restart("execution")
        assert cluster.components["execution"].running
        with pytest.raises(ComponentFailed, match="still running"):
            cluster.restart("execution")
    assert not any(c.running for c in cluster.components.values())


def test_a_component_that_cannot_start_is_reported_with_its_log(
    tmp_path: Path, sqlite_test_url: str
) -> None:
    cluster = LocalCluster(
        tmp_path,
        db_url=sqlite_test_url,
        env={"accounting": {"DXTS_ACCOUNTING_FOLD_BATCH": "0"}},
    )
    with pytest.raises(ComponentFailed, match="accounting exited") as error:
        cluster.__enter__()
    assert "fold_batch" in str(error.value)


def test_a_port_taken_before_its_component_binds_it_is_chosen_again(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # The first port chosen (definition's) is one another process holds by then.
        choices = iter([port])
        monkeypatch.setattr(cluster_module, "free_port", lambda: next(choices, None) or free_port())

        with LocalCluster(tmp_path, db_url=db_url, backends=[Backend("null")]) as cluster:
            assert cluster.addresses["definition"] != f"127.0.0.1:{port}"
            assert all(c.running for c in cluster.components.values())
