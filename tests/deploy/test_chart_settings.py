"""The chart and the components' settings agree: every DXTS_* variable a Deployment sets is one
its component reads, and every setting a component cannot do without in a cluster is set.

What a component reads is introspected from its pydantic-settings classes (env_prefix + field
name, or the field's validation aliases), the classes its console script's module builds from
(checked below, so a new settings class cannot be forgotten here)."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from types import ModuleType
from typing import Any

import pytest
from pydantic import AliasChoices
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from dxts.accounting.settings import AccountingSettings
from dxts.backends.local.settings import LocalSettings
from dxts.backends.null.settings import NullSettings
from dxts.backends.slurm.settings import SlurmSettings
from dxts.core.catalogue import CatalogueSettings
from dxts.core.grpc.tls import TlsSettings
from dxts.core.settings import AuthSettings, DatabaseSettings, DataDirSettings, ServerSettings
from dxts.definition.settings import DefinitionSettings, LifecycleSettings
from dxts.dispatcher.settings import DispatcherSettings
from dxts.execution.settings import ExecutionSettings

Manifests = list[dict[str, Any]]
SERVED = [ServerSettings, AuthSettings, TlsSettings]
SERVICE = [*SERVED, DatabaseSettings]

# Component (the Deployment's component label) → the module its command runs, and the settings
# classes that process reads. CatalogueSettings is read below the module: by the lifecycle
# engine's catalogue (definition), open_catalogue (execution), load_catalogue (local adaptor).
COMPONENTS: dict[str, tuple[str, list[type[BaseSettings]]]] = {
    "definition": (
        "dxts.definition.__main__",
        [*SERVICE, DefinitionSettings, LifecycleSettings, CatalogueSettings],
    ),
    "execution": ("dxts.execution.__main__", [*SERVICE, ExecutionSettings, CatalogueSettings]),
    "accounting": ("dxts.accounting.__main__", [*SERVICE, AccountingSettings]),
    "dispatcher": ("dxts.dispatcher.__main__", [*SERVICE, DispatcherSettings]),
    "backend-local": ("dxts.backends.local.__main__", [*SERVED, LocalSettings, CatalogueSettings]),
    "backend-null": ("dxts.backends.null.__main__", [*SERVED, NullSettings]),
    "backend-slurm": ("dxts.backends.slurm.__main__", [*SERVED, SlurmSettings, CatalogueSettings]),
}
# Every console script serves through this shell: it reads SERVED's settings (DXTS_DATA_DIR for
# the development key pair, listed under UNSET_ON_PURPOSE), DatabaseSettings
# when the component asks it for the database, CatalogueSettings when it asks for the catalogue.
SHELL = "dxts.core.component"
ASKS = {"process.database()": DatabaseSettings, "process.catalogue()": CatalogueSettings}

# Settings whose default only works on one machine: a cluster must set them.
NOT_FOR_A_CLUSTER = {
    "DXTS_DB_URL": "a SQLite file in the working directory (read-only here, and per pod)",
    "DXTS_CATALOGUE_URL": "a SQLite file in the working directory (read-only here, and per pod)",
    "DXTS_LISTEN": "127.0.0.1: no other pod could reach it, nor the probes",
}

# Settings without a default (None) that a Deployment may leave unset, and why. With an
# alternative named, that alternative must be set instead.
UNSET_ON_PURPOSE: dict[str, tuple[str, str | None]] = {
    "DXTS_DATA_DIR": ("the development key pair of a single machine", None),
    "DXTS_AUTH_PUBLIC_KEY": ("the key is a mounted file", "DXTS_AUTH_PUBLIC_KEY_FILE"),
    "DXTS_AUTH_SHARED_SECRET": (
        "tokens are verified with a public key",
        "DXTS_AUTH_PUBLIC_KEY_FILE",
    ),
    "DXTS_SERVICE_TOKEN": ("the token is a mounted Secret file", "DXTS_SERVICE_TOKEN_FILE"),
    "DXTS_BACKEND_POLICY": ("the policy is the installation file's section", "DXTS_CONFIG_FILE"),
    "DXTS_LOCAL_STORAGE_ROOT": ("derived from DXTS_LOCAL_WORK_DIR", "DXTS_LOCAL_WORK_DIR"),
    "DXTS_LOCAL_OUTPUT_SE": ("the first storage element", None),
    "DXTS_SLURM_STORAGE_ROOT": ("derived from DXTS_SLURM_WORK_DIR", "DXTS_SLURM_WORK_DIR"),
    "DXTS_SLURM_OUTPUT_SE": ("the first storage element", None),
    "DXTS_NULL_USAGE": ("unset, the null adaptor reports no usage (as a real backend may)", None),
    "DXTS_NULL_RETAIN_S": ("unset, the null adaptor remembers every job it accepted", None),
    "DXTS_TLS_SERVER_NAME": ("the certificate names every component's Service", None),
    "DXTS_DISPATCH_VO_IN_FLIGHT_CAP": ("no cap unless dispatcher.voInFlightCap is set", None),
}
# The null adaptor calls the dispatcher only when it pushes its reports.
PUSH_ONLY = {"DXTS_DISPATCHER_ADDRESS", "DXTS_SERVICE_TOKEN_FILE"}


def variables(settings: type[BaseSettings]) -> dict[str, FieldInfo]:
    """The environment variables a settings class reads, upper-cased, with their fields."""
    prefix = settings.model_config.get("env_prefix", "")
    found = {}
    for name, info in settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names = [choice for choice in alias.choices if isinstance(choice, str)]
        elif isinstance(alias, str):
            names = [alias]
        else:
            names = [f"{prefix}{name}"]
        # An alias choice without the prefix (the Python name) is how callers pass the value.
        found.update({env.upper(): info for env in names if env.upper().startswith("DXTS_")})
    return found


def read_by(component: str) -> dict[str, FieldInfo]:
    return {
        name: info
        for settings in COMPONENTS[component][1]
        for name, info in variables(settings).items()
    }


def settings_classes(module: ModuleType) -> set[type[BaseSettings]]:
    return {
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, BaseSettings) and value is not BaseSettings
    }


def deployments(rendered: dict[str, Manifests], value_set: str) -> list[tuple[str, dict[str, Any]]]:
    """(component, container) of every Deployment."""
    found = []
    for doc in rendered[value_set]:
        if doc["kind"] == "Deployment":
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            found.append((doc["metadata"]["labels"]["app.kubernetes.io/component"], container))
    return found


def test_the_introspection_reads_what_pydantic_settings_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The helper's notion of a field's variable is pydantic-settings' own: a prefixed field,
    an aliased one, and an alias choice beside the prefix (which does not apply to it)."""
    assert {"DXTS_LISTEN", "DXTS_METRICS_PORT"} <= set(variables(ServerSettings))
    assert "DXTS_EXECUTION_ADDRESS" in variables(DefinitionSettings)
    assert "DXTS_DEFINITION_EXECUTION_ADDRESS" not in variables(DefinitionSettings)
    monkeypatch.setenv("DXTS_METRICS_PORT", "9191")
    monkeypatch.setenv("DXTS_EXECUTION_ADDRESS", "execution:1")
    monkeypatch.setenv("DXTS_DEFINITION_EXECUTION_ADDRESS", "ignored:2")
    assert ServerSettings().metrics_port == 9191
    assert DefinitionSettings().execution_address == "execution:1"


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_the_command_runs_the_module_whose_settings_are_listed(component: str) -> None:
    module_name, classes = COMPONENTS[component]
    module = importlib.import_module(module_name)
    (script,) = [
        entry
        for entry in importlib.metadata.entry_points(group="console_scripts")
        if entry.name == f"dxts-{component}"
    ]
    assert script.load() is module.main
    shell = settings_classes(importlib.import_module(SHELL))
    assert shell == {ServerSettings, AuthSettings, DataDirSettings, *ASKS.values()}
    source = inspect.getsource(module)
    used = settings_classes(module) | {ServerSettings, AuthSettings}
    used |= {settings for call, settings in ASKS.items() if call in source}
    assert used - {ServerSettings, AuthSettings}, module_name
    assert used <= set(classes), f"{module_name} reads settings this test does not list"


def test_the_lists_above_name_real_settings() -> None:
    everything = {name for component in COMPONENTS for name in read_by(component)}
    assert set(NOT_FOR_A_CLUSTER) | set(UNSET_ON_PURPOSE) | PUSH_ONLY <= everything
    for name in NOT_FOR_A_CLUSTER:
        (default,) = {
            str(info.default) for c in COMPONENTS for n, info in read_by(c).items() if n == name
        }
        assert default.startswith(("sqlite", "127.0.0.1")), name


@pytest.mark.parametrize("value_set", ["default", "external-db", "everything", "galera"])
def test_every_variable_a_deployment_sets_is_read_by_its_component(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    found = deployments(rendered, value_set)
    assert {component for component, _ in found} <= set(COMPONENTS)
    for component, container in found:
        assert container["command"] == [f"dxts-{component}"]
        set_here = {entry["name"] for entry in container["env"]}
        assert set_here, component
        unread = {name for name in set_here if name.startswith("DXTS_")} - set(read_by(component))
        assert not unread, f"{component} is given {sorted(unread)}, which it never reads"


@pytest.mark.parametrize("value_set", ["default", "external-db", "everything", "galera"])
def test_every_setting_a_component_needs_in_a_cluster_is_set(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    for component, container in deployments(rendered, value_set):
        env = {entry["name"]: entry for entry in container["env"]}
        pushes = env.get("DXTS_NULL_REPORT_MODE", {}).get("value") == "push"
        for name, info in read_by(component).items():
            where = f"{component}: {name}"
            no_catalogue = any(
                key.endswith("_CATALOGUE") and entry.get("value") == "false"
                for key, entry in env.items()
            )
            if name.startswith("DXTS_CATALOGUE_") and no_catalogue:
                continue  # an adaptor given no catalogue credential opens none
            if info.is_required() or name in NOT_FOR_A_CLUSTER:
                assert name in env, f"{where} must be set"
                continue
            if info.default is not None or info.default_factory is not None or name in env:
                continue
            if component == "backend-null" and name in PUSH_ONLY:
                assert not pushes, f"{where}: a pushing null adaptor needs it"
                continue
            assert name in UNSET_ON_PURPOSE, f"{where} has no default and is not set"
            alternative = UNSET_ON_PURPOSE[name][1]
            if alternative is not None:
                assert alternative in env, f"{where} is unset, but so is {alternative}"


def test_the_failover_wait_is_given_to_every_component_with_a_database(
    rendered: dict[str, Manifests],
) -> None:
    """`database.failoverWaitSeconds` (values/galera.yaml) reaches each pod that reads
    DXTS_DB_URL, and no other; unset, the setting's own default holds."""
    with_database = 0
    for component, container in deployments(rendered, "galera"):
        env = {entry["name"]: entry for entry in container["env"]}
        if "DXTS_DB_URL" in env:
            with_database += 1
            assert env["DXTS_DB_FAILOVER_WAIT_S"]["value"] == "30", component
        else:
            assert "DXTS_DB_FAILOVER_WAIT_S" not in env, component
    assert with_database >= 4
    for _, container in deployments(rendered, "default"):
        assert "DXTS_DB_FAILOVER_WAIT_S" not in {entry["name"] for entry in container["env"]}
