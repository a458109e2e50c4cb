"""Configuration defaults, and the one function that resolves them against a document's hints.

What a document leaves unset is filled in layers: installation → VO → the VO's workgraph type →
`dirac:Workgraph` → `dirac:Transformation` (or a data-management declaration), each layer
overriding the one before. The compiler uses `resolve_hints` to fill the definition columns; the
dispatcher uses the same function for the resolved-hints sidecar, so the two never disagree
about what was in force.

Merge rules, per field: a binding (packer, a hook, an action list) is replaced whole by a layer
that sets it, because arguments of one plugin mean nothing to another; the requirements template
is merged key by key; a step's `output_sandbox` patterns are added to the workgraph's (the
schema says so), while a configuration layer's replace the layer before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dxts.core.errors import FieldViolation, InvalidArgument

ACTION_LISTS = ("Finalizing", "Archiving", "Cleaning")


class Defaults(BaseModel):
    """One layer of defaults; a field left unset inherits from the layer before."""

    model_config = ConfigDict(extra="forbid")

    workgraph_hooks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    approving: list[dict[str, Any]] | None = None
    hooks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    packer: dict[str, Any] | None = None
    actions: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    output_sandbox: list[str] | None = None
    requirements_template: dict[str, Any] = Field(default_factory=dict)
    executing_identity: str | None = Field(None, max_length=64)


class VODefaults(BaseModel):
    model_config = ConfigDict(extra="forbid")

    defaults: Defaults = Field(default_factory=Defaults)
    types: dict[str, Defaults] = Field(default_factory=dict)


def _builtin() -> Defaults:
    """The lists DX-ADR-006 gives, built from dxts's own plugins: database cleanup last."""
    return Defaults(
        hooks={"HandleFailedInput": {"hook": "RetryUntilMaxErrors"}},
        packer={"name": "PerInput"},
        actions={
            "Archiving": [{"action": "CleanIntermediates"}, {"action": "CleanDatabaseEntries"}],
            "Cleaning": [
                {"action": "CancelInFlightParcels"},
                {"action": "RemoveOutputFiles"},
                {"action": "RemoveIntermediateFiles"},
                {"action": "CleanDatabaseEntries"},
            ],
        },
    )


class DefinitionConfig(BaseModel):
    """The defaults of one installation (a YAML file, `DXTS_DEFINITION_CONFIG`)."""

    model_config = ConfigDict(extra="forbid")

    default_type: str = Field("Default", max_length=32)
    installation: Defaults = Field(default_factory=_builtin)
    vos: dict[str, VODefaults] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _installation_has_a_packer(self) -> DefinitionConfig:
        # Transformations.Packer is NOT NULL: a step naming none needs a default to fall to.
        if not self.installation.packer or "name" not in self.installation.packer:
            raise ValueError("installation.packer needs a name: it is every member's default")
        return self

    @classmethod
    def from_file(cls, path: Path) -> DefinitionConfig:
        try:
            return cls.model_validate(yaml.safe_load(path.read_text()) or {})
        except ValidationError as exc:
            raise InvalidArgument(
                [
                    FieldViolation(".".join(str(p) for p in e["loc"]), e["msg"])
                    for e in exc.errors(include_url=False)
                ]
            ) from None

    def layers(self, vo: str, workgraph_type: str) -> list[Defaults]:
        chain = [self.installation]
        if vo in self.vos:
            chain.append(self.vos[vo].defaults)
            if workgraph_type in self.vos[vo].types:
                chain.append(self.vos[vo].types[workgraph_type])
        return chain


@dataclass(frozen=True)
class ResolvedHints:
    """The effective values for one member (or for the workgraph alone, without a step)."""

    type: str
    workgraph_hooks: dict[str, Any]
    approving: list[dict[str, Any]]
    hooks: dict[str, Any]
    packer: dict[str, Any]
    actions: dict[str, list[dict[str, Any]]]
    output_sandbox: list[str]
    requirements_template: dict[str, Any]
    executing_identity: str | None

    def as_json(self) -> dict[str, Any]:
        """The sidecar form: what ResolvedHints stores, content-addressed."""
        return {
            "type": self.type,
            "workgraph_hooks": self.workgraph_hooks,
            "approving": self.approving,
            "hooks": self.hooks,
            "packer": self.packer,
            "actions": self.actions,
            "output_sandbox": self.output_sandbox,
            "requirements_template": self.requirements_template,
            "executing_identity": self.executing_identity,
        }


def _layer_from_workgraph_hint(hint: Mapping[str, Any]) -> Defaults:
    return Defaults.model_construct(
        workgraph_hooks=dict(hint.get("hooks") or {}),
        approving=hint.get("approving"),
        hooks={},
        packer=None,
        actions={},
        output_sandbox=hint.get("output_sandbox"),
        requirements_template={},
        executing_identity=None,
    )


def resolve_hints(
    config: DefinitionConfig,
    *,
    vo: str,
    workgraph_hint: Mapping[str, Any] | None,
    transformation_hint: Mapping[str, Any] | None = None,
) -> ResolvedHints:
    """Installation → VO → type → `dirac:Workgraph` → `dirac:Transformation`, per field.

    `transformation_hint` is a step's `dirac:Transformation` or a data-management declaration
    (both carry packer, actions, output_sandbox); hooks and requirements_template only a step.
    """
    workgraph_hint = workgraph_hint or {}
    step = transformation_hint or {}
    workgraph_type = workgraph_hint.get("type") or config.default_type
    layers = [*config.layers(vo, workgraph_type), _layer_from_workgraph_hint(workgraph_hint)]
    workgraph_hooks: dict[str, Any] = {}
    hooks: dict[str, Any] = {}
    approving: list[dict[str, Any]] = []
    packer: dict[str, Any] = {}
    actions: dict[str, list[dict[str, Any]]] = {}
    sandbox: list[str] = []
    requirements: dict[str, Any] = {}
    identity = None
    for layer in layers:
        workgraph_hooks.update(layer.workgraph_hooks)
        hooks.update(layer.hooks)
        actions.update(layer.actions)
        requirements.update(layer.requirements_template)
        if layer.approving is not None:
            approving = list(layer.approving)
        if layer.packer is not None:
            packer = dict(layer.packer)
        if layer.output_sandbox is not None:
            sandbox = list(layer.output_sandbox)
        if layer.executing_identity is not None:
            identity = layer.executing_identity
    hooks.update(step.get("hooks") or {})
    actions.update(step.get("actions") or {})
    requirements.update(step.get("requirements_template") or {})
    if step.get("packer") is not None:
        packer = dict(step["packer"])
    sandbox += [p for p in step.get("output_sandbox") or [] if p not in sandbox]
    return ResolvedHints(
        type=workgraph_type,
        workgraph_hooks=workgraph_hooks,
        approving=approving,
        hooks=hooks,
        packer=packer,
        actions={name: actions[name] for name in ACTION_LISTS if actions.get(name)},
        output_sandbox=sandbox,
        requirements_template=requirements,
        executing_identity=identity,
    )
