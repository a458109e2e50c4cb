"""The installation file (DXTS_CONFIG_FILE) is read by one loader, so the definition service and
the dispatcher cannot resolve different defaults from one deployment, and the chart's ConfigMap
says what that loader reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_render import VALUE_SETS, of_kind

from dxts.core.config import (
    CONFIG_FILE_VARIABLE,
    DefinitionConfig,
    load_installation_config,
    resolve_hints,
)
from dxts.core.db import Database
from dxts.core.errors import InvalidArgument
from dxts.definition.settings import DefinitionSettings
from dxts.dispatcher.component import build_dispatcher
from dxts.dispatcher.settings import BackendPolicy, DispatcherSettings

FILE = {
    "default_type": "MC",
    "installation": {"executing_identity": "production", "output_sandbox": ["*.log"]},
    "vos": {"lhcb": {"types": {"MC": {"packer": {"name": "BySize", "args": {"size": 3}}}}}},
    "backend_policy": {"compute": {"default": "local"}},
}


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "dxts.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_without_a_file_the_built_in_defaults_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_FILE_VARIABLE, raising=False)
    loaded = load_installation_config()
    assert loaded.definition == DefinitionConfig()
    assert loaded.backend_policy is None


def test_the_installation_section_is_a_layer_over_the_built_in_defaults(tmp_path: Path) -> None:
    loaded = load_installation_config(write(tmp_path, FILE))
    built_in = DefinitionConfig().installation
    installation = loaded.definition.installation
    assert installation.executing_identity == "production"
    assert installation.output_sandbox == ["*.log"]
    # What the section leaves out keeps the built-in value.
    assert installation.packer == built_in.packer == {"name": "PerInput"}
    assert installation.hooks == built_in.hooks and installation.actions == built_in.actions
    assert loaded.definition.default_type == "MC"
    assert loaded.definition.vos["lhcb"].types["MC"].packer == {
        "name": "BySize",
        "args": {"size": 3},
    }
    assert loaded.backend_policy == {"compute": {"default": "local"}}


def test_a_field_the_section_sets_replaces_the_built_in_one_whole(tmp_path: Path) -> None:
    loaded = load_installation_config(write(tmp_path, {"installation": {"actions": {}}}))
    assert loaded.definition.installation.actions == {}


def test_the_file_named_by_the_environment_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_FILE_VARIABLE, str(write(tmp_path, FILE)))
    assert load_installation_config().definition.default_type == "MC"


@pytest.mark.parametrize(
    ("document", "fields"),
    [
        pytest.param({"defaults": {}}, {"defaults"}, id="guessed-section"),
        pytest.param({"plugins": {"Seeds": {}}}, {"plugins"}, id="plugins-are-environment"),
        pytest.param({"installation": {"packer": {"args": {}}}}, {"installation"}, id="no-packer"),
        pytest.param(
            {"installation": {"pakcer": {}}, "vos": {"lhcb": {"defualts": {}}}},
            {"installation.pakcer", "vos.lhcb.defualts"},
            id="every-misspelling-at-once",
        ),
        pytest.param({"backend_policy": ["local"]}, {"backend_policy"}, id="policy-not-a-mapping"),
        pytest.param(
            {"document_limits": {"max_depth": 5000, "max_nodez": 1}},
            {"document_limits.max_depth", "document_limits.max_nodez"},
            id="document-limits",
        ),
    ],
)
def test_a_wrong_file_is_refused_naming_each_field(
    tmp_path: Path, document: dict[str, Any], fields: set[str]
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        load_installation_config(write(tmp_path, document))
    assert {violation.field for violation in refused.value.violations} == fields


def test_the_document_limits_section_sets_the_limits_it_names(tmp_path: Path) -> None:
    limits = load_installation_config(
        write(tmp_path, {"document_limits": {"max_depth": 10}})
    ).definition.document_limits
    assert limits.max_depth == 10
    assert limits.max_nodes == DefinitionConfig().document_limits.max_nodes


@pytest.mark.parametrize("text", ["[installation, vos]\n", "installation: {\n"])
def test_a_file_that_is_not_a_mapping_of_sections_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "dxts.yaml"
    path.write_text(text)
    with pytest.raises(InvalidArgument) as refused:
        load_installation_config(path)
    assert [violation.field for violation in refused.value.violations] == ["config_file"]


async def test_definition_and_dispatcher_resolve_the_same_sidecar_from_the_one_variable(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the chart sets (DXTS_CONFIG_FILE only) reaches both readers of the defaults."""
    monkeypatch.setenv(CONFIG_FILE_VARIABLE, str(write(tmp_path, FILE)))
    monkeypatch.setenv("DXTS_BACKENDS", '[{"name": "local", "address": "127.0.0.1:1"}]')
    # Addresses only: channels connect lazily, and no sweep runs.
    monkeypatch.setenv("DXTS_DEFINITION_ADDRESS", "127.0.0.1:1")
    monkeypatch.setenv("DXTS_EXECUTION_ADDRESS", "127.0.0.1:1")
    definition = DefinitionSettings().definition_config()
    dispatcher = DispatcherSettings()
    assert dispatcher.backend_policy == BackendPolicy.model_validate(FILE["backend_policy"])
    component = await build_dispatcher(
        database, settings=dispatcher, token="unused", start_sweeps=False
    )
    try:
        materialised = component.dispatcher.materialiser.config
    finally:
        await component.stop()
    assert materialised == definition != DefinitionConfig()
    hint = {"type": "MC"}
    assert resolve_hints(materialised, vo="lhcb", workgraph_hint=hint) == resolve_hints(
        definition, vo="lhcb", workgraph_hint=hint
    )


@pytest.mark.parametrize("value_set", list(VALUE_SETS))
def test_the_chart_config_map_is_a_file_the_loader_reads(
    rendered: dict[str, list[dict[str, Any]]], value_set: str, tmp_path: Path
) -> None:
    config_map = of_kind(rendered[value_set], "ConfigMap")["dx-dxts-config"]
    path = tmp_path / "dxts.yaml"
    path.write_text(config_map["data"]["dxts.yaml"])
    loaded = load_installation_config(path)
    if loaded.backend_policy is not None:
        BackendPolicy.model_validate(loaded.backend_policy)
