"""RetryByRules (HandleFailedInput): the fate of a Failed input decided by ordered rules that
match its parcel's failure.

A rule matches the parcel the input last failed in by its failure class (one of a list: the
taxonomy every adaptor reports, `out-of-memory`, `application-error`…), the backend's raw status
(a regular expression, searched), its exit code (one of a list), a regular expression searched in
its failure message (the backend's words, else the reason dxts recorded) and in the tool's own
error line, and the backend's name;
every criterion a rule gives must hold, and a rule with none matches every failure. The first
rule that matches decides:

* `retry` — pack the input again as it was (ToUnassigned);
* `raise` — pack it again asking for more: each requirement named under `raise` multiplied by its
  `factor` from what the failed parcel asked (or `start`, the backend's default, when it asked
  none), at most `max` (RetryWith). A requirement already at its cap (or above it) cannot be
  raised: the input is set aside instead;
* `elsewhere` — pack it again for the backend named by `backend` (RetryWith);
* `give_up` — write it off, NotProcessed, with the rule and the failure as the reason (WriteOff);
* `set_aside` — Problematic, for an operator (ToProblematic).

Retrying is bounded: past `max_errors` failed parcels (the rule's own, else the hook's, else
`DXTS_HOOK_RETRY_MAX_ERRORS`) a retrying rule sets the input aside. A failure no rule matches is
retried until that budget, as RetryUntilMaxErrors does.

`mode: log_only` (or a rule's own `log_only: true`) is the dry run: the input's fate is what it
would be with no rules (retried until the budget, then Problematic), and the log says what the
rule would have done. Every decision carries a note naming the rule that fired, which execution
writes to the transformation's log (`FailedInputDecided`).

The rules come from the binding's `rules` (the installation file binds the hook with its rules
as a default per VO and workgraph type; a document overrides a step's binding in its
`dirac:Transformation` hooks), else from the installation's `DXTS_HOOK_RETRY_RULES` (JSON).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from dxts.core.adaptor.model import FailureClass
from dxts.core.builtins.hooks import RetrySettings
from dxts.core.plugins import (
    InputRecord,
    Parcel,
    PluginArgs,
    RetryWith,
    ToProblematic,
    ToUnassigned,
    WriteOff,
    hook,
)

Action = Literal["retry", "raise", "elsewhere", "give_up", "set_aside"]
Mode = Literal["apply", "log_only"]
RETRYING = ("retry", "raise", "elsewhere")


def _pattern(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"not a regular expression: {error}") from None
    return value


class Match(BaseModel):
    """What a failure must show for the rule to fire; a criterion left out matches anything."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_class: list[FailureClass] | None = Field(
        None, min_length=1, description="one of these (`unclassified`: no adaptor classified it)"
    )
    raw_status: str | None = Field(None, description="searched in the backend's raw status")
    exit_code: list[int] | None = Field(None, min_length=1, description="one of these")
    message: str | None = Field(None, description="searched in the failure message")
    backend: str | None = Field(None, min_length=1, description="the backend it ran on")

    _check_patterns = field_validator("raw_status", "message")(_pattern)

    @field_validator("exit_code", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("failure_class", mode="before")
    @classmethod
    def _one_or_many_classes(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def matches(self, parcel: Parcel | None) -> bool:
        if parcel is None:  # failed before any parcel: only a catch-all rule applies
            return self == Match()
        text = "\n".join(filter(None, (parcel.message or parcel.reason, parcel.tool_message)))
        return (
            (
                self.failure_class is None
                or (parcel.failure_class or FailureClass.UNSPECIFIED) in self.failure_class
            )
            and (self.raw_status is None or re.search(self.raw_status, parcel.raw_status or ""))
            is not None
            and (self.exit_code is None or parcel.exit_code in self.exit_code)
            and (self.message is None or re.search(self.message, text) is not None)
            and (self.backend is None or parcel.backend == self.backend)
        )


class Raise(BaseModel):
    """How one requirement is raised: by `factor`, from `start` when the parcel asked none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    factor: float = Field(gt=1)
    max: float = Field(gt=0, description="the cap it is never raised beyond")
    start: float | None = Field(None, gt=0, description="the backend's default (else: max)")

    def raised(self, asked: Any) -> float | int:
        """The next value after `asked` (None: the parcel asked none), capped; an integer
        stays one (rounded up)."""
        number = asked if isinstance(asked, int | float) and not isinstance(asked, bool) else None
        base = number if number is not None else self.start
        if base is None:
            return _same_kind(self.max, asked)
        return _same_kind(min(self.max, base * self.factor), asked)


def _same_kind(value: float, like: Any) -> float | int:
    return math.ceil(value) if like is None or isinstance(like, int) else value


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1, max_length=64)
    match: Match = Field(default_factory=Match)
    action: Action
    raise_: dict[str, Raise] | None = Field(None, alias="raise", min_length=1)
    backend: str | None = Field(None, min_length=1, max_length=32)
    max_errors: int | None = Field(None, ge=1, description="instead of the hook's budget")
    log_only: bool = False

    @model_validator(mode="after")
    def _complete(self) -> Rule:
        if (self.action == "raise") != (self.raise_ is not None):
            raise ValueError("`raise` names the requirements to raise, for action raise only")
        if (self.action == "elsewhere") != (self.backend is not None):
            raise ValueError("`backend` names where to retry, for action elsewhere only")
        return self


def _distinct_names(rules: list[Rule] | None) -> list[Rule] | None:
    names = [rule.name for rule in rules or ()]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"rule names repeat: {', '.join(repeated)}")
    return rules


class RetryRuleSettings(BaseSettings):
    """The installation's rules when a binding gives none (`DXTS_HOOK_RETRY_RULES`, JSON)."""

    model_config = SettingsConfigDict(env_prefix="DXTS_HOOK_RETRY_", extra="ignore")

    rules: list[Rule] = Field(default_factory=list)
    mode: Mode = "apply"

    _distinct = field_validator("rules")(_distinct_names)


class RetryByRulesArgs(PluginArgs):
    rules: list[Rule] | None = Field(None, description="in order (default: the settings')")
    mode: Mode | None = Field(None, description="log_only: a dry run (default: the settings')")
    max_errors: int | None = Field(None, ge=1, description="the retry budget (default: settings)")

    _distinct = field_validator("rules")(_distinct_names)


Decision = ToUnassigned | ToProblematic | RetryWith | WriteOff


def first_match(rules: list[Rule], parcel: Parcel | None) -> Rule | None:
    """The first rule whose criteria the parcel's failure meets."""
    return next((rule for rule in rules if rule.match.matches(parcel)), None)


def failure_of(parcel: Parcel | None) -> str:
    if parcel is None:
        return "no parcel"
    said = [f"{parcel.backend or 'no backend'}"]
    if parcel.raw_status:
        said.append(parcel.raw_status)
    if parcel.exit_code is not None:
        said.append(f"exit code {parcel.exit_code}")
    text = parcel.tool_message or parcel.message or parcel.reason  # the tool's words first
    return " ".join(said) + (f": {text}" if text else "")


def decide(rule: Rule, input: InputRecord, parcel: Parcel | None, budget: int) -> Decision:
    """What `rule` does with the input (applied, not logged-only)."""
    tag = f"rule {rule.name}"
    limit = rule.max_errors or budget
    if rule.action == "give_up":
        return WriteOff(reason=f"{tag}: {failure_of(parcel)}", note=f"{tag}: written off")
    if rule.action == "set_aside":
        return ToProblematic(reason=f"{tag}: {failure_of(parcel)}", note=f"{tag}: set aside")
    if input.error_count >= limit:
        why = f"failed in {input.error_count} parcels (limit {limit})"
        return ToProblematic(
            reason=f"{tag}: {why}: {failure_of(parcel)}", note=f"{tag}: set aside, {why}"
        )
    if rule.action == "retry":
        return ToUnassigned(note=f"{tag}: retried")
    if rule.action == "elsewhere":
        assert rule.backend is not None
        return RetryWith(backend=rule.backend, note=f"{tag}: retried on {rule.backend}")
    assert rule.raise_ is not None
    asked = parcel.requirements if parcel is not None else {}
    raised = {key: how.raised(asked.get(key)) for key, how in rule.raise_.items()}
    capped = [key for key, value in raised.items() if not _below(asked.get(key), value)]
    if capped:
        why = f"{', '.join(capped)} already at the cap"
        return ToProblematic(
            reason=f"{tag}: {why}: {failure_of(parcel)}", note=f"{tag}: set aside, {why}"
        )
    changes = ", ".join(f"{key} {asked.get(key, 'unset')} → {raised[key]}" for key in raised)
    return RetryWith(requirements=raised, note=f"{tag}: retried with {changes}")


def _below(asked: Any, raised: float | int) -> bool:
    """Whether `raised` is more than the parcel asked (anything is, when it asked no number)."""
    if not isinstance(asked, int | float) or isinstance(asked, bool):
        return True
    return raised > asked


def by_default(input: InputRecord, parcel: Parcel | None, budget: int) -> tuple[Decision, str]:
    """What RetryUntilMaxErrors would do, and what it did in words for the log."""
    if input.error_count < budget:
        return ToUnassigned(), "retried"
    why = f"failed in {input.error_count} parcels (limit {budget})"
    return ToProblematic(reason=f"{why}: {failure_of(parcel)}"), f"set aside, {why}"


@hook("HandleFailedInput")
def retry_by_rules(
    *,
    input: InputRecord,
    parcel: Parcel | None,
    args: RetryByRulesArgs,
    settings: RetryRuleSettings,
    budget_settings: RetrySettings,
) -> Decision:
    rules = args.rules if args.rules is not None else settings.rules
    mode = args.mode or settings.mode
    budget = args.max_errors or budget_settings.max_errors
    rule = first_match(rules, parcel)
    if rule is None:
        fallback, did = by_default(input, parcel, budget)
        return replace(fallback, note=f"no rule matched: {did}")
    decision = decide(rule, input, parcel, budget)
    if mode == "log_only" or rule.log_only:
        would = decision.note.removeprefix(f"rule {rule.name}: ")
        fallback, did = by_default(input, parcel, budget)
        note = f"log only: rule {rule.name} would have {would} (as without rules: {did})"
        return replace(fallback, note=note)
    return decision
