"""The installation's policy: what no document can change, and the quotas.

The `policy` section of the installation file (`dxts.core.config`), with per-VO overrides under
`policy.vos.<vo>`: each field a VO block sets replaces the installation's, `requirements` and
`quotas` key by key. Defaults are the layers a document may override; the policy is what it may
not:

* `required_approving` — actions every workgraph's approving list starts with, whatever the
  document says (`approving: []` keeps them); the document's own actions follow.
* who may sign off — a sign-off (`ManualApproval`'s `role`, or the operator role) is never a
  role a plain user holds (`plain_roles`); with `sign_off_roles` set, a sign-off may name only
  those; the submitter may force the approving actions of her own workgraph only when
  `self_sign_off` says so.
* `requirements` — caps on `cores`, memory (`memory_mb`, and `memory_gb` counted in MiB) and
  `wall_time_s`, each refused over the cap (mode `refuse`: the submission fails naming the
  limit) or lowered to it (mode `cap`); allow-lists of `partitions` and `sites`.
* `quotas` — inputs per feeder invocation and per member, inputs created per user per hour
  (the feeding path holds a feeder that reaches one), workgraphs active per user (refused at
  submission and at start).

Everything here is pure (no database): the definition service checks documents with it, the
compiler and the dispatcher resolve requirements and approving lists through
`dxts.core.config.resolve_hints`, and execution's feeder runner reads the quotas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# What a requirement named in MiB of memory is, per key a requirements template may use.
MEMORY_KEYS = {"memory_mb": 1, "memory_gb": 1024}


class Mode(StrEnum):
    """What happens to a value over its cap: the document is refused, or the value lowered."""

    REFUSE = "refuse"
    CAP = "cap"


class Cap(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max: float = Field(gt=0, description="the largest value a parcel may ask for")
    mode: Mode = Mode.REFUSE


class RequirementLimits(BaseModel):
    """Caps and allow-lists on what a requirements template asks; None: not limited."""

    model_config = ConfigDict(extra="forbid")

    cores: Cap | None = None
    memory_mb: Cap | None = Field(None, description="also applies to memory_gb, in MiB")
    wall_time_s: Cap | None = None
    partitions: list[str] | None = Field(
        None, description="the partitions a template may name (empty: none)"
    )
    sites: list[str] | None = Field(None, description="the sites a template may name")


class Quotas(BaseModel):
    """Limits on what one member, one user, one invocation may create; None: no limit."""

    model_config = ConfigDict(extra="forbid")

    inputs_per_invocation: int | None = Field(None, ge=1)
    inputs_per_member: int | None = Field(None, ge=1)
    inputs_per_user_hour: int | None = Field(None, ge=1)
    active_workgraphs_per_user: int | None = Field(None, ge=1)


class _Fields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    required_approving: list[dict[str, Any]] = Field(default_factory=list)
    sign_off_roles: list[str] | None = None
    plain_roles: list[str] = Field(default_factory=lambda: ["user"])
    self_sign_off: bool = True
    requirements: RequirementLimits = Field(default_factory=RequirementLimits)
    quotas: Quotas = Field(default_factory=Quotas)


class VOPolicy(_Fields):
    """One VO's overrides: only the fields it sets count (`Policy.for_vo`)."""


class Policy(_Fields):
    """The installation's policy and its VOs' overrides (see the module)."""

    vos: dict[str, VOPolicy] = Field(default_factory=dict)

    def for_vo(self, vo: str) -> Policy:
        """The policy in force for `vo`: the VO's fields over the installation's."""
        override = self.vos.get(vo)
        if override is None:
            return self
        mine = self.model_dump(exclude={"vos"})
        theirs = override.model_dump(exclude_unset=True)
        for nested in ("requirements", "quotas"):
            if nested in theirs:
                given = getattr(override, nested).model_dump(exclude_unset=True)
                theirs[nested] = {**mine[nested], **given}
        return Policy.model_validate({**mine, **theirs})

    # -- approving ------------------------------------------------------------------------------

    def approving(self, asked: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The required actions, then the document's (those equal to a required one dropped)."""
        required = [dict(a) for a in self.required_approving]
        return required + [dict(a) for a in asked if a not in required]

    def sign_off_problem(self, role: str) -> str | None:
        """Why a sign-off cannot name `role` (None: it can)."""
        if role in self.plain_roles:
            return (
                f"a sign-off cannot be given by the {role!r} role: every plain user holds it "
                f"(policy.plain_roles)"
            )
        if self.sign_off_roles is not None and role not in self.sign_off_roles:
            allowed = ", ".join(self.sign_off_roles) or "none"
            return (
                f"the installation allows sign-offs by the roles {allowed} only "
                f"(policy.sign_off_roles), not {role!r}"
            )
        return None

    # -- requirements ---------------------------------------------------------------------------

    def requirement_problems(self, template: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(key, what is wrong) for each value over a refusing cap or outside an allow-list."""
        problems = []
        for key, cap, value in self._capped_values(template):
            if cap.mode is Mode.REFUSE and value > cap.max:
                problems.append((key, _over(key, template[key], cap.max)))
        limits = self.requirements
        for key, allowed, label in (
            ("partition", limits.partitions, "partitions"),
            ("sites", limits.sites, "sites"),
        ):
            if allowed is None or key not in template:
                continue
            named = template[key]
            names = [named] if isinstance(named, str) else named
            if not isinstance(names, list):
                continue  # not a name: the backend refuses it in its own words
            refused = [n for n in names if n not in allowed]
            if refused:
                problems.append(
                    (
                        key,
                        f"{', '.join(map(str, refused))} not allowed: the installation allows "
                        f"the {label} {', '.join(allowed) or '(none)'} only "
                        f"(policy.requirements.{label})",
                    )
                )
        return problems

    def capped(self, template: dict[str, Any]) -> dict[str, Any]:
        """`template` with every value over a `cap`-mode limit lowered to the limit."""
        changes: dict[str, Any] = {}
        for key, cap, value in self._capped_values(template):
            if cap.mode is Mode.CAP and value > cap.max:
                limit = cap.max / MEMORY_KEYS.get(key, 1)
                changes[key] = math.floor(limit) if limit >= 1 else limit
        return {**template, **changes} if changes else template

    def _capped_values(self, template: Mapping[str, Any]) -> list[tuple[str, Cap, float]]:
        """(key, its cap, the value in the cap's unit) for each numeric value under a cap."""
        limits = self.requirements
        caps = {"cores": limits.cores, "wall_time_s": limits.wall_time_s}
        caps |= {key: limits.memory_mb for key in MEMORY_KEYS}
        found = []
        for key, cap in caps.items():
            value = template.get(key)
            if cap is None or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            found.append((key, cap, float(value) * MEMORY_KEYS.get(key, 1)))
        return found


def _over(key: str, value: float, limit: float) -> str:
    field = "memory_mb" if key in MEMORY_KEYS else key
    unit = " MiB" if key in MEMORY_KEYS else ""
    return (
        f"{key} {value:g} is over the installation's limit of {limit:g}{unit} "
        f"(policy.requirements.{field}.max)"
    )
