"""Defaults resolution (installation → VO → type → hints) and the content-addressed sidecar."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from dxts.core import content_store as store
from dxts.core.config import (
    Defaults,
    DefinitionConfig,
    VODefaults,
    load_installation_config,
    resolve_hints,
)
from dxts.core.db import Database, Isolation
from dxts.core.errors import InvalidArgument
from dxts.core.ids import content_hash
from dxts.core.schema.definition import resolved_hints

CONFIG = DefinitionConfig(
    installation=Defaults(
        packer={"name": "PerInput"},
        output_sandbox=["*.log"],
        actions={"Archiving": [{"action": "CleanDatabaseEntries"}]},
        requirements_template={"priority": 0, "memory_gb": 2},
    ),
    vos={
        "lhcb": VODefaults(
            defaults=Defaults(
                executing_identity="lhcb_prod",
                hooks={"HandleFailedInput": {"hook": "LHCbRetry"}},
                requirements_template={"priority": 5},
            ),
            types={
                "MCSimulation": Defaults(
                    packer={"name": "BySize", "args": {"group_size": 3}},
                    approving=[{"action": "CheckSuccessRate"}],
                    workgraph_hooks={"Active": {"hook": "LHCbMCTarget"}},
                )
            },
        )
    },
)


def test_each_layer_overrides_the_one_before() -> None:
    resolved = resolve_hints(
        CONFIG,
        vo="lhcb",
        workgraph_hint={"type": "MCSimulation", "output_sandbox": ["summary*.xml"]},
        transformation_hint={
            "packer": {"name": "ByRun", "args": {"group_size": 2}},
            "output_sandbox": ["prmon*"],
            "requirements_template": {"memory_gb": 4},
            "actions": {"Finalizing": [{"action": "NoInputProcessedTwice"}]},
        },
    )
    assert resolved.type == "MCSimulation"
    assert resolved.packer == {"name": "ByRun", "args": {"group_size": 2}}  # step wins whole
    assert resolved.output_sandbox == [
        "summary*.xml",
        "prmon*",
    ]  # workgraph's replaced, step's added
    assert resolved.requirements_template == {"priority": 5, "memory_gb": 4}  # key by key
    assert resolved.hooks == {"HandleFailedInput": {"hook": "LHCbRetry"}}
    assert resolved.workgraph_hooks == {"Active": {"hook": "LHCbMCTarget"}}
    assert resolved.approving == [{"action": "CheckSuccessRate"}]
    assert resolved.actions == {
        "Finalizing": [{"action": "NoInputProcessedTwice"}],
        "Archiving": [{"action": "CleanDatabaseEntries"}],
    }
    assert resolved.executing_identity == "lhcb_prod"


def test_another_vo_or_type_gets_only_the_installation_defaults() -> None:
    resolved = resolve_hints(CONFIG, vo="belle", workgraph_hint={"type": "MCSimulation"})
    assert resolved.packer == {"name": "PerInput"}
    assert resolved.executing_identity is None and resolved.approving == []
    assert resolve_hints(CONFIG, vo="lhcb", workgraph_hint={}).type == "Default"


def test_a_configuration_file_is_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("vos:\n  lhcb:\n    defaults: {executing_identity: lhcb_mc}\n")
    loaded = load_installation_config(good).definition
    assert loaded.vos["lhcb"].defaults.executing_identity == "lhcb_mc"
    bad = tmp_path / "bad.yaml"
    bad.write_text("installation: {packer: {args: {}}}\nvos: {lhcb: {defualts: {}}}\n")
    with pytest.raises(InvalidArgument) as raised:
        load_installation_config(bad)
    assert {v.field for v in raised.value.violations} >= {"vos.lhcb.defualts"}


async def test_the_sidecar_is_stored_once_by_its_hash(database: Database) -> None:
    sidecar = resolve_hints(CONFIG, vo="lhcb", workgraph_hint={"type": "MCSimulation"}).as_json()
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        first = await store.put_resolved_hints(conn, sidecar)
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        again = await store.put_resolved_hints(conn, dict(reversed(list(sidecar.items()))))
        stored = (await conn.execute(sa.select(resolved_hints))).all()
    assert first == again == content_hash(sidecar)
    assert [(row.ResolvedHintsID, row.Hints) for row in stored] == [(first, sidecar)]
