"""RetryByRules: which rule a failure meets, and what the rule decides (table-driven), through
the registry exactly as execution's failed-input runner calls it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from dxts.core.adaptor.model import FailureClass
from dxts.core.builtins.hooks import RetrySettings
from dxts.core.builtins.retry_rules import (
    RetryByRulesArgs,
    RetryRuleSettings,
    Rule,
    first_match,
    retry_by_rules,
)
from dxts.core.errors import InvalidArgument
from dxts.core.plugins import (
    InputRecord,
    Parcel,
    Phase,
    Point,
    Providers,
    Registry,
    RetryWith,
    ToProblematic,
    ToUnassigned,
    WriteOff,
)
from dxts.core.states import InputStatus, Kind, ParcelStatus

RULES: list[dict[str, Any]] = [
    {"name": "oom", "match": {"raw_status": "OUT_OF_MEMORY"}, "action": "raise",
     "raise": {"memory_mb": {"factor": 2, "max": 8000, "start": 1000}}},
    {"name": "timeout", "match": {"raw_status": "^TIMEOUT", "backend": "slurm"},
     "action": "raise", "raise": {"wall_time_s": {"factor": 1.5, "max": 7200}}},
    {"name": "missing", "match": {"message": "(?i)no such file"}, "action": "give_up"},
    {"name": "segv", "match": {"exit_code": [139, 134]}, "action": "set_aside"},
    {"name": "site", "match": {"backend": "diracx", "message": "(?i)site"},
     "action": "elsewhere", "backend": "slurm"},
    {"name": "flaky", "match": {"exit_code": 75, "backend": "slurm"}, "action": "retry",
     "max_errors": 2},
]  # fmt: skip
# By the failure taxonomy: the class every adaptor reports, whatever its raw status says.
BY_CLASS: list[dict[str, Any]] = [
    {"name": "memory", "match": {"failure_class": "out-of-memory"}, "action": "raise",
     "raise": {"memory_mb": {"factor": 2, "max": 8000, "start": 1000}}},
    {"name": "staging", "match": {"failure_class": ["stage-in", "stage-out"]},
     "action": "elsewhere", "backend": "diracx"},
    {"name": "calibration", "match": {"failure_class": "application-error",
                                      "message": "calibration"}, "action": "give_up"},
    {"name": "mystery", "match": {"failure_class": "unclassified"}, "action": "set_aside"},
]  # fmt: skip


def failure(
    backend: str | None = "slurm",
    raw_status: str | None = "FAILED 1:0",
    exit_code: int | None = 1,
    message: str | None = None,
    reason: str | None = None,
    failure_class: FailureClass | None = None,
    tool_message: str | None = None,
    **requirements: Any,
) -> Parcel:
    return Parcel(
        id=uuid.uuid4(),
        kind=Kind.COMPUTE,
        status=ParcelStatus.FAILED,
        backend=backend,
        reason=reason,
        raw_status=raw_status,
        exit_code=exit_code,
        message=message,
        requirements=requirements,
        failure_class=failure_class,
        tool_message=tool_message,
    )


def failed_input(errors: int = 1) -> InputRecord:
    return InputRecord(
        id=uuid.uuid4(),
        lfn="/lhcb/a.raw",
        lfn_size=1,
        descriptor=None,
        status=InputStatus.FAILED,
        error_count=errors,
    )


@pytest.mark.parametrize(
    ("parcel", "fired"),
    [
        (failure(raw_status="OUT_OF_MEMORY"), "oom"),
        (failure(raw_status="FAILED 0:9 OUT_OF_MEMORY"), "oom"),  # searched, not anchored
        (failure(raw_status="TIMEOUT 0:15"), "timeout"),
        (failure(raw_status="TIMEOUT 0:15", backend="local"), None),  # every criterion holds
        (failure(raw_status="CANCELLED TIMEOUT"), None),  # ^ anchors
        (failure(message="open /data/x: No such file or directory"), "missing"),
        (failure(message=None, reason="no such file: /data/x"), "missing"),  # dxts's reason
        (failure(exit_code=139), "segv"),
        (failure(exit_code=134), "segv"),
        (failure(exit_code=None), None),  # an unknown exit code meets no exit_code criterion
        (failure(backend="diracx", message="Site LCG.CERN.cern is banned"), "site"),
        (failure(backend="slurm", message="Site LCG.CERN.cern is banned"), None),
        (failure(exit_code=75), "flaky"),
        (failure(raw_status="OUT_OF_MEMORY", message="no such file"), "oom"),  # the first wins
        (None, None),  # no parcel: only a rule with no criterion would match
    ],
)
def test_the_first_rule_whose_every_criterion_holds_fires(
    parcel: Parcel | None, fired: str | None
) -> None:
    rules = RetryByRulesArgs.model_validate({"rules": RULES}).rules
    assert rules is not None
    rule = first_match(rules, parcel)
    assert (rule.name if rule else None) == fired


@pytest.mark.parametrize(
    ("parcel", "fired"),
    [
        (failure(failure_class=FailureClass.OUT_OF_MEMORY, raw_status="FAILED 0:9"), "memory"),
        (failure(failure_class=FailureClass.STAGE_IN), "staging"),
        (failure(failure_class=FailureClass.STAGE_OUT), "staging"),
        # the message criterion also reads the tool's own line
        (failure(failure_class=FailureClass.APPLICATION_ERROR, message="exited with 3",
                 tool_message="ERROR: no calibration for run 7"), "calibration"),
        (failure(failure_class=FailureClass.APPLICATION_ERROR, message="exited with 3"), None),
        (failure(failure_class=FailureClass.TIME_EXCEEDED), None),
        # a parcel with no recorded class, and one an adaptor left unclassified
        (failure(), "mystery"),
        (failure(failure_class=FailureClass.UNSPECIFIED), "mystery"),
        (None, None),
    ],
)  # fmt: skip
def test_a_rule_matches_on_the_failure_class(parcel: Parcel | None, fired: str | None) -> None:
    rules = RetryByRulesArgs.model_validate({"rules": BY_CLASS}).rules
    assert rules is not None
    rule = first_match(rules, parcel)
    assert (rule.name if rule else None) == fired


def test_a_decision_on_a_class_gives_the_tools_own_line_as_its_reason() -> None:
    parcel = failure(
        failure_class=FailureClass.APPLICATION_ERROR,
        message="the payload exited with 3",
        tool_message="ERROR: no calibration for run 7",
        exit_code=3,
    )
    assert decide(parcel, rules=BY_CLASS) == WriteOff(
        reason="rule calibration: slurm FAILED 1:0 exit code 3: ERROR: no calibration for run 7",
        note="rule calibration: written off",
    )


def decide(
    parcel: Parcel | None, errors: int = 1, rules: list[dict[str, Any]] = RULES, **args: Any
) -> Any:
    return retry_by_rules(
        input=failed_input(errors),
        parcel=parcel,
        args=RetryByRulesArgs.model_validate({"rules": rules, **args}),
        settings=RetryRuleSettings(),
        budget_settings=RetrySettings(max_errors=3),
    )


@pytest.mark.parametrize(
    ("parcel", "errors", "decision"),
    [
        # raised from the backend's default when the parcel asked none, then doubled, capped
        (failure(raw_status="OUT_OF_MEMORY"), 1,
         RetryWith(requirements={"memory_mb": 2000},
                   note="rule oom: retried with memory_mb unset → 2000")),
        (failure(raw_status="OUT_OF_MEMORY", memory_mb=3000), 2,
         RetryWith(requirements={"memory_mb": 6000},
                   note="rule oom: retried with memory_mb 3000 → 6000")),
        (failure(raw_status="OUT_OF_MEMORY", memory_mb=6000), 2,
         RetryWith(requirements={"memory_mb": 8000},
                   note="rule oom: retried with memory_mb 6000 → 8000")),
        # at the cap: set aside rather than retried as it was
        (failure(raw_status="OUT_OF_MEMORY", memory_mb=8000), 2,
         ToProblematic(reason="rule oom: memory_mb already at the cap: "
                              "slurm OUT_OF_MEMORY exit code 1",
                       note="rule oom: set aside, memory_mb already at the cap")),
        # above the cap already (a template asking more): never lowered
        (failure(raw_status="OUT_OF_MEMORY", memory_mb=9000), 1,
         ToProblematic(reason="rule oom: memory_mb already at the cap: "
                              "slurm OUT_OF_MEMORY exit code 1",
                       note="rule oom: set aside, memory_mb already at the cap")),
        # no start: from nothing straight to the cap; a float stays a float
        (failure(raw_status="TIMEOUT"), 1,
         RetryWith(requirements={"wall_time_s": 7200},
                   note="rule timeout: retried with wall_time_s unset → 7200")),
        (failure(raw_status="TIMEOUT", wall_time_s=1000.0), 1,
         RetryWith(requirements={"wall_time_s": 1500.0},
                   note="rule timeout: retried with wall_time_s 1000.0 → 1500.0")),
        # past the budget, even a raising rule sets the input aside
        (failure(raw_status="OUT_OF_MEMORY"), 3,
         ToProblematic(reason="rule oom: failed in 3 parcels (limit 3): "
                              "slurm OUT_OF_MEMORY exit code 1",
                       note="rule oom: set aside, failed in 3 parcels (limit 3)")),
        (failure(message="No such file"), 1,
         WriteOff(reason="rule missing: slurm FAILED 1:0 exit code 1: No such file",
                  note="rule missing: written off")),
        (failure(exit_code=139), 1,
         ToProblematic(reason="rule segv: slurm FAILED 1:0 exit code 139",
                       note="rule segv: set aside")),
        (failure(backend="diracx", message="site down"), 1,
         RetryWith(backend="slurm", note="rule site: retried on slurm")),
        (failure(exit_code=75), 1, ToUnassigned(note="rule flaky: retried")),
        # the rule's own budget
        (failure(exit_code=75), 2,
         ToProblematic(reason="rule flaky: failed in 2 parcels (limit 2): "
                              "slurm FAILED 1:0 exit code 75",
                       note="rule flaky: set aside, failed in 2 parcels (limit 2)")),
        # no rule: retried until the hook's budget, as RetryUntilMaxErrors does
        (failure(), 2, ToUnassigned(note="no rule matched: retried")),
        (failure(), 3,
         ToProblematic(reason="failed in 3 parcels (limit 3): slurm FAILED 1:0 exit code 1",
                       note="no rule matched: set aside, failed in 3 parcels (limit 3)")),
    ],
)  # fmt: skip
def test_a_rule_decides_what_its_action_says(parcel: Parcel, errors: int, decision: object) -> None:
    assert decide(parcel, errors) == decision


def test_log_only_decides_as_without_rules_and_notes_what_the_rule_would_have_done() -> None:
    oom = failure(raw_status="OUT_OF_MEMORY")
    assert decide(oom, 1, mode="log_only") == ToUnassigned(
        note="log only: rule oom would have retried with memory_mb unset → 2000 "
        "(as without rules: retried)"
    )
    missing = failure(message="no such file")
    assert decide(missing, 3, mode="log_only") == ToProblematic(
        reason="failed in 3 parcels (limit 3): slurm FAILED 1:0 exit code 1: no such file",
        note="log only: rule missing would have written off (as without rules: set aside, "
        "failed in 3 parcels (limit 3))",
    )
    # A rule of its own in log-only mode, beside applied ones.
    trial = [{**RULES[2], "log_only": True}]
    assert decide(missing, 1, rules=trial) == ToUnassigned(
        note="log only: rule missing would have written off (as without rules: retried)"
    )


def test_the_rules_come_from_the_settings_when_the_binding_gives_none() -> None:
    settings = RetryRuleSettings.model_validate({"rules": RULES[2:3]})
    decision = retry_by_rules(
        input=failed_input(),
        parcel=failure(message="No such file"),
        args=RetryByRulesArgs(),
        settings=settings,
        budget_settings=RetrySettings(),
    )
    assert isinstance(decision, WriteOff)


@pytest.mark.parametrize(
    ("rules", "path"),
    [
        ([{"name": "x", "action": "raise"}], "rules[0]"),  # raise without what to raise
        ([{"name": "x", "action": "retry", "raise": {"memory_mb": {"factor": 2, "max": 4}}}],
         "rules[0]"),
        ([{"name": "x", "action": "elsewhere"}], "rules[0]"),  # elsewhere without a backend
        ([{"name": "x", "action": "retry", "match": {"message": "("}}], "rules[0].match.message"),
        ([{"name": "x", "action": "retry", "match": {"exitcode": 1}}],
         "rules[0].match.exitcode"),
        ([{"name": "x", "action": "raise", "raise": {"memory_mb": {"factor": 1, "max": 4}}}],
         "rules[0].raise.memory_mb.factor"),
        ([{"name": "x", "action": "retry"}, {"name": "x", "action": "give_up"}], "rules"),
        ([{"name": "x", "action": "again"}], "rules[0].action"),
        ([{"name": "x", "action": "retry", "match": {"failure_class": "oom"}}],
         "rules[0].match.failure_class[0]"),
        ([{"name": "x", "action": "retry", "match": {"failure_class": []}}],
         "rules[0].match.failure_class"),
    ],
)  # fmt: skip
def test_bad_rules_are_refused_at_the_field(rules: list[dict[str, Any]], path: str) -> None:
    registry = Registry.of({"hook": {"RetryByRules": retry_by_rules}}, providers=Providers())
    with pytest.raises(InvalidArgument) as refused:
        registry.validate_args(
            "hook",
            "RetryByRules",
            {"rules": rules},
            phase=Phase.ACTIVE,
            point=Point.HANDLE_FAILED_INPUT,
        )
    fields = [v.field for v in refused.value.violations]
    assert f"args.{path}" in fields, fields


async def test_the_registry_runs_the_hook_as_execution_does() -> None:
    registry = Registry.of({"hook": {"RetryByRules": retry_by_rules}}, providers=Providers())
    registry.check()
    decision = await registry.call(
        Point.HANDLE_FAILED_INPUT,
        "RetryByRules",
        {"rules": RULES},
        phase=Phase.ACTIVE,
        transformation=None,
        input=failed_input(),
        parcel=failure(raw_status="OUT_OF_MEMORY", memory_mb=1500),
    )
    assert decision == RetryWith(
        requirements={"memory_mb": 3000}, note="rule oom: retried with memory_mb 1500 → 3000"
    )
    assert Rule.model_validate(RULES[0]).raise_ is not None
