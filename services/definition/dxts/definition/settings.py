"""The definition service's own settings (the shared ones are in dxts.core.settings).

Read from `DXTS_DEFINITION_*` (`DXTS_DEFINITION_CONFIG` included: a DefinitionConfig file, as
`dxts validate` and the dispatcher read it), except the names the chart gives every service:
`DXTS_EXECUTION_ADDRESS` (where Flush, halts and user parcels are forwarded),
`DXTS_CONFIG_FILE` (the installation configuration) and `DXTS_DATA_DIR` (development keys).

The installation file is shared by every component, each reading its own sections. The
definition service reads `default_type`, `installation` and `vos` (DefinitionConfig's fields);
the chart's `defaults` section, when not empty, is the installation layer, merged over the
built-in defaults so that a partial section keeps (for instance) the default packer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import AliasChoices, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.config import Defaults, DefinitionConfig
from dxts.core.errors import FieldViolation, InvalidArgument

CONFIG_SECTIONS = ("default_type", "installation", "vos")


class DefinitionSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_DEFINITION_", extra="ignore")

    execution_address: str | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_EXECUTION_ADDRESS", "execution_address"),
        description="host:port of the execution service; None: Flush, halts and user jobs "
        "answer UNAVAILABLE",
    )
    config: Path | None = Field(
        None,
        description="DXTS_DEFINITION_CONFIG: a DefinitionConfig YAML file (what `dxts validate` "
        "and the dispatcher read); when set it wins over DXTS_CONFIG_FILE",
    )
    config_file: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_CONFIG_FILE", "config_file"),
        description="the installation configuration (YAML); None: the built-in defaults",
    )
    data_dir: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_DATA_DIR", "data_dir"),
        description="where the development token key pair lives when no key is configured",
    )
    operator_role: str = Field(
        "operator",
        min_length=1,
        description="token role that may steer every workgraph of its VO and force sign-offs",
    )
    service_role: str = Field(
        "service",
        min_length=1,
        description="token role of dxts's own components: sees every VO's transformations and "
        "processes (the execution sweeps, the dispatcher), steers nothing",
    )

    def definition_config(self) -> DefinitionConfig:
        if self.config is not None:
            return DefinitionConfig.from_file(self.config)
        return load_config(self.config_file) if self.config_file else DefinitionConfig()


def load_config(path: Path) -> DefinitionConfig:
    """The definition part of the installation file; InvalidArgument naming each bad field."""
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise InvalidArgument(f"cannot read {path}: {error}", field="config_file") from None
    if not isinstance(document, dict):
        raise InvalidArgument(f"{path} is not a mapping", field="config_file")
    values: dict[str, Any] = {k: document[k] for k in CONFIG_SECTIONS if k in document}
    try:
        config = DefinitionConfig.model_validate(values)
        layer = document.get("defaults") or {}
        if layer and "installation" not in values:
            patch = Defaults.model_validate(layer).model_dump(exclude_unset=True)
            merged = config.installation.model_copy(update=patch)
            config = DefinitionConfig.model_validate(
                {**values, "installation": merged.model_dump()}
            )
    except ValidationError as error:
        raise InvalidArgument(
            [
                FieldViolation(".".join(str(p) for p in e["loc"]), e["msg"])
                for e in error.errors(include_url=False)
            ]
        ) from None
    return config
