"""The installation's policy as a value (`dxts.core.policy`): how a VO's block overrides the
installation's, and what each rule says of a requirements template or a sign-off role. The
behaviour through the services is tests/e2e/test_e2e_policy.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from dxts.core.config import load_installation_config, resolve_hints
from dxts.core.errors import InvalidArgument
from dxts.core.policy import Policy

POLICY = Policy.model_validate(
    {
        "required_approving": [{"action": "ManualApproval"}],
        "requirements": {
            "cores": {"max": 8},
            "memory_mb": {"max": 4096, "mode": "cap"},
            "sites": ["LCG.CERN.ch"],
        },
        "quotas": {"inputs_per_invocation": 30, "inputs_per_member": 100},
        "vos": {
            "belle": {
                "self_sign_off": False,
                "quotas": {"inputs_per_invocation": None},
                "requirements": {"cores": {"max": 64, "mode": "cap"}},
            }
        },
    }
)


def test_a_vos_block_replaces_the_fields_it_sets_and_keeps_the_others() -> None:
    belle = POLICY.for_vo("belle")
    assert belle.self_sign_off is False and POLICY.self_sign_off is True
    assert (belle.quotas.inputs_per_invocation, belle.quotas.inputs_per_member) == (None, 100)
    assert belle.requirements.cores is not None and belle.requirements.cores.max == 64
    assert belle.requirements.memory_mb == POLICY.requirements.memory_mb  # kept, key by key
    assert belle.required_approving == POLICY.required_approving
    assert POLICY.for_vo("nobody") is POLICY


def test_requirements_are_refused_or_capped_naming_the_limit() -> None:
    template = {"cores": 100_000, "memory_gb": 1000, "sites": ["LCG.CERN.ch", "Evil.site"]}
    problems = dict(POLICY.requirement_problems(template))
    assert problems.keys() == {"cores", "sites"}  # memory is capped, not refused
    assert "(policy.requirements.cores.max)" in problems["cores"]
    assert problems["sites"].startswith("Evil.site not allowed")
    assert POLICY.capped(template) == {**template, "memory_gb": 4}  # 4096 MiB
    assert POLICY.for_vo("belle").capped({"cores": 100}) == {"cores": 64}


def test_the_required_approving_actions_come_first_whatever_the_document_says() -> None:
    assert POLICY.approving([]) == [{"action": "ManualApproval"}]
    check = {"action": "CheckSuccessRate"}
    assert POLICY.approving([check, {"action": "ManualApproval"}]) == [
        {"action": "ManualApproval"},
        check,
    ]


@pytest.mark.parametrize(("role", "refused"), [("user", True), ("lhcb_manager", False)])
def test_a_sign_off_is_never_a_plain_users_role(role: str, refused: bool) -> None:
    assert (POLICY.sign_off_problem(role) is not None) is refused
    listed = Policy(sign_off_roles=["prod"])
    assert listed.sign_off_problem("lhcb_manager") is not None
    assert listed.sign_off_problem("prod") is None


def test_the_installation_file_carries_the_policy_and_resolve_hints_applies_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dxts.yaml"
    path.write_text(
        "policy:\n  required_approving: [{action: ManualApproval}]\n"
        "  requirements: {memory_mb: {max: 100, mode: cap}}\n"
    )
    config = load_installation_config(path).definition
    resolved = resolve_hints(
        config,
        vo="lhcb",
        workgraph_hint={"approving": []},
        transformation_hint={"requirements_template": {"memory_mb": 10**9}},
    )
    assert resolved.approving == [{"action": "ManualApproval"}]
    assert resolved.requirements_template == {"memory_mb": 100}
    path.write_text("policy:\n  requirements: {cores: {max: 8, mode: sometimes}}\n")
    with pytest.raises(InvalidArgument, match=r"policy\.requirements\.cores\.mode"):
        load_installation_config(path)
