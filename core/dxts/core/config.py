"""The installation's configuration file, its defaults, and the one function that resolves them
against a document's hints.

One YAML file configures an installation (`DXTS_CONFIG_FILE`; the Helm chart mounts its `config`
value there), and every component reads it with `load_installation_config`, so no two of them can
disagree about what it says. Its sections, each optional:

* `default_type` — the workgraph type of a document that names none ("Default");
* `installation` — the installation layer of defaults (`Defaults`), over the built-in one: each
  field it sets replaces the built-in field, the fields it leaves out keep theirs (the PerInput
  packer, RetryUntilMaxErrors, the Archiving and Cleaning lists);
* `vos` — per VO, its `defaults` layer and one layer per workgraph type (`types`);
* `backend_policy` — which backend gets a parcel the packer did not direct (the dispatcher's
  `BackendPolicy`: per kind, a `default` backend and an optional `route`);
* `document_limits` — how big, deep and aliased a submitted document may be (`DocumentLimits`),
  checked before anything parses it, by the definition service and the CLI alike;
* `policy` — what no document can change, and the quotas (`dxts.core.policy.Policy`, with
  per-VO overrides): the approving list's required actions, who may sign off, caps and
  allow-lists on requirements. `resolve_hints` applies it last, over every layer.

Anything else is refused, naming the section: a misspelt section would otherwise be ignored.
Plugin settings are not in the file: a plugin's settings class reads the environment.

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

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.policy import Policy

ACTION_LISTS = ("Finalizing", "Archiving", "Cleaning")
CONFIG_FILE_VARIABLE = "DXTS_CONFIG_FILE"


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
    """The defaults an installation starts from, from dxts's own plugins: database cleanup last."""
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


class DocumentLimits(BaseModel):
    """What a submitted document may make the parser do, refused before it does it.

    A YAML alias names a node written once but expanded wherever it is used, so a kilobyte of
    aliases can stand for a billion nodes; `max_nodes` counts nodes as expanded. The depth
    bound keeps every recursive walk of a document (the YAML composer, cwl-utils, hashing) far
    from Python's recursion limit, hence its ceiling.
    """

    model_config = ConfigDict(extra="forbid")

    max_document_bytes: int = Field(1 << 20, ge=1, description="one file of the bundle, UTF-8")
    max_bundle_bytes: int = Field(4 << 20, ge=1, description="every file the document reads")
    max_data_bytes: int = Field(
        3 << 20,
        ge=1,
        description="one data file of the bundle (an $include, a default File, a $schemas "
        "ontology), which no YAML loader reads",
    )
    max_bundle_files: int = Field(500, ge=1, description="files in the bundle")
    max_depth: int = Field(64, ge=2, le=200, description="nested mappings and sequences")
    max_nodes: int = Field(50_000, ge=1, description="nodes of one file, aliases expanded")
    max_aliases: int = Field(1_000, ge=0, description="alias uses (`*name`) in one file")
    max_bundle_nodes: int = Field(
        100_000, ge=1, description="nodes of every file loaded, $imports expanded"
    )


class DefinitionConfig(BaseModel):
    """The defaults of one installation: what the definition service compiles with and the
    dispatcher resolves each parcel's sidecar with (`InstallationConfig.definition`)."""

    model_config = ConfigDict(extra="forbid")

    default_type: str = Field("Default", max_length=32)
    installation: Defaults = Field(default_factory=_builtin)
    vos: dict[str, VODefaults] = Field(default_factory=dict)
    document_limits: DocumentLimits = Field(default_factory=DocumentLimits)
    policy: Policy = Field(default_factory=Policy)

    @field_validator("installation")
    @classmethod
    def _installation_has_a_packer(cls, installation: Defaults) -> Defaults:
        # Transformations.Packer is NOT NULL: a step naming none needs a default to fall to.
        if not installation.packer or "name" not in installation.packer:
            raise ValueError("installation.packer needs a name: it is every member's default")
        return installation

    def layers(self, vo: str, workgraph_type: str) -> list[Defaults]:
        chain = [self.installation]
        if vo in self.vos:
            chain.append(self.vos[vo].defaults)
            if workgraph_type in self.vos[vo].types:
                chain.append(self.vos[vo].types[workgraph_type])
        return chain


class _InstallationFile(BaseModel):
    """The file's sections as written (see the module); `installation` is a layer."""

    model_config = ConfigDict(extra="forbid")

    default_type: str = Field("Default", max_length=32)
    installation: Defaults = Field(default_factory=Defaults)
    vos: dict[str, VODefaults] = Field(default_factory=dict)
    backend_policy: dict[str, Any] | None = None
    document_limits: DocumentLimits = Field(default_factory=DocumentLimits)
    policy: Policy = Field(default_factory=Policy)


@dataclass(frozen=True)
class InstallationConfig:
    """What the installation file says, by reader: the definition defaults (the definition
    service, the dispatcher's sidecars, `dxts validate`) and the dispatcher's backend policy
    (checked by the dispatcher, which owns its model; None: not configured)."""

    definition: DefinitionConfig = field(default_factory=DefinitionConfig)
    backend_policy: dict[str, Any] | None = None


def load_installation_config(path: Path | str | None = None) -> InstallationConfig:
    """The installation file at `path`, else at `DXTS_CONFIG_FILE`; the built-in defaults when
    neither names one. A file that cannot be read or says anything wrong is InvalidArgument,
    one violation per bad field (`installation.packer`, `vos.lhcb.defaults`, ...)."""
    if path is None or path == "":
        path = os.environ.get(CONFIG_FILE_VARIABLE) or None
    if path is None:
        return InstallationConfig()
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise InvalidArgument(f"cannot read {path}: {error}", field="config_file") from None
    if not isinstance(document, dict):
        raise InvalidArgument(f"{path} is not a mapping of sections", field="config_file")
    try:
        written = _InstallationFile.model_validate(document)
        layer = written.installation.model_dump(exclude_unset=True)
        definition = DefinitionConfig.model_validate(
            {
                "default_type": written.default_type,
                "installation": _builtin().model_copy(update=layer),
                "vos": written.vos,
                "document_limits": written.document_limits,
                "policy": written.policy,
            }
        )
    except ValidationError as exc:
        raise InvalidArgument(
            [
                FieldViolation(".".join(str(p) for p in e["loc"]), e["msg"])
                for e in exc.errors(include_url=False)
            ]
        ) from None
    return InstallationConfig(definition, written.backend_policy)


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
    """Installation → VO → type → `dirac:Workgraph` → `dirac:Transformation`, per field, then
    the VO's policy over all of them: its required approving actions first in the list, and
    requirements over a `cap`-mode limit lowered to it.

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
    policy = config.policy.for_vo(vo)
    return ResolvedHints(
        type=workgraph_type,
        workgraph_hooks=workgraph_hooks,
        approving=policy.approving(approving),
        hooks=hooks,
        packer=packer,
        actions={name: actions[name] for name in ACTION_LISTS if actions.get(name)},
        output_sandbox=sandbox,
        requirements_template=policy.capped(requirements),
        executing_identity=identity,
    )
