"""The registry: what start-up refuses, and argument validation as submission uses it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plugins_support as s
import pytest

from dxts.core.errors import InvalidArgument, NotFound
from dxts.core.plugins import (
    NoArgs,
    Phase,
    PluginKind,
    PluginRegistryError,
    Point,
    Providers,
    Registry,
    action,
    hook,
)


def registry(kind: str, **plugins: Callable[..., Any]) -> Registry:
    return Registry.of({kind: plugins})


def problems(kind: str, **plugins: Callable[..., Any]) -> list[str]:
    with pytest.raises(PluginRegistryError) as error:
        registry(kind, **plugins)
    return error.value.problems


def test_signatures_are_read_once() -> None:
    plugins = Registry.of(
        {
            "feeder": {"Seeds": s.seeds, "None": s.nothing},
            "packer": {"Pairs": s.pairs},
            "hook": {"Retry": s.retry, "Govern": s.govern},
            "action": {"Check": s.check},
        }
    )
    seeds = plugins.get("feeder", "Seeds")
    assert seeds.args_model is s.SeedArgs
    assert seeds.declared == {"feeder_args", "feeder_state", "scouting"}
    assert [(i.parameter, i.annotation) for i in seeds.injections] == [("counter", s.Counter)]
    assert plugins.get("feeder", "None").args_model is NoArgs
    assert plugins.get("hook", "Retry").points == {Point.HANDLE_FAILED_INPUT}
    assert plugins.get("action", "Check").points == {Point.FINALIZING, Point.ARCHIVING}
    assert plugins.names("feeder") == ["None", "Seeds"]
    assert len(plugins) == 6
    with pytest.raises(NotFound):
        plugins.get("packer", "Seeds")


@pytest.mark.parametrize(
    ("kind", "function", "problem"),
    [
        ("hook", s.undecorated_hook, "decorate it with dxts.core.plugins.hook"),
        ("action", s.retry, "decorate it with dxts.core.plugins.action"),
        ("hook", s.generator_hook, "cannot be a generator"),
        ("feeder", s.not_a_model, "feeder_args must be annotated with a pydantic model"),
        ("packer", s.loose, "silently ignores unknown keys"),
        ("feeder", s.positional_only, "'feeder_state' must be passable by keyword"),
        ("feeder", s.star_args, "'args' must be passable by keyword"),
        ("feeder", s.unannotated, "'mystery' is not one the core passes"),
        ("feeder", "not callable", "is not callable"),
    ],
)
def test_unusable_plugins_are_refused_at_start_up(kind: str, function: Any, problem: str) -> None:
    (found,) = problems(kind, Broken=function)
    assert found.startswith(f"{kind} 'Broken' (")
    assert problem in found


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(PluginRegistryError) as error:
        Registry.of({"feeder": {"A": s.not_a_model, "B": s.star_args, "Fine": s.seeds}})
    assert len(error.value.problems) == 2
    assert "feeder 'A'" in str(error.value) and "feeder 'B'" in str(error.value)


def test_names_fit_the_columns() -> None:
    (found,) = problems("feeder", **{"x" * 65: s.seeds})
    assert "1-64 characters" in found


def test_the_decorators_refuse_wrong_points() -> None:
    with pytest.raises(ValueError, match="not a hook point"):
        hook("Finalizing")
    with pytest.raises(ValueError, match="Approving action cannot also"):
        action("Approving", "Finalizing")
    with pytest.raises(ValueError):
        action("Seeds")


def test_hook_bindings_name_points_per_owner() -> None:
    assert Point.of_hook_binding("workgraph", "Active") is Point.WORKGRAPH_ACTIVE
    assert Point.of_hook_binding("transformation", "Active") is Point.TRANSFORMATION_ACTIVE
    assert Point.CLEANING.state == "Cancelling"
    with pytest.raises(ValueError, match="HandleFailedInput"):
        Point.of_hook_binding("workgraph", "HandleFailedInput")


def test_an_annotation_nothing_provides_fails_the_check() -> None:
    plugins = registry("feeder", NeedsCatalogue=s.needs_catalogue, Maybe=s.maybe_catalogue)
    with pytest.raises(PluginRegistryError) as error:
        plugins.check()
    (found,) = error.value.problems
    assert "feeder 'NeedsCatalogue'" in found
    assert "parameter 'catalogue' is annotated Catalogue, which nothing provides" in found


def test_provided_annotations_and_settings_pass_the_check() -> None:
    providers = Providers()
    providers.add(s.Counter, s.Counter())
    plugins = Registry.of(
        {"feeder": {"Seeds": s.seeds, "Async": s.async_seeds}}, providers=providers
    )
    plugins.check()
    with pytest.raises(ValueError, match="already has a provider"):
        providers.add(s.Counter, s.Counter())


def test_invalid_settings_fail_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DXTS_TEST_KNOBS_DEPTH", "deep")
    with pytest.raises(PluginRegistryError, match="Knobs is invalid"):
        registry("feeder", Async=s.async_seeds).check()


class TestValidateArgs:
    plugins = Registry.of(
        {
            "feeder": {"Seeds": s.seeds, "Context": s.context_checked},
            "hook": {"Retry": s.retry},
        }
    )

    def test_valid_args_come_back_as_the_model(self) -> None:
        args = self.plugins.validate_args("feeder", "Seeds", {"count": 5}, phase="active")
        assert args == s.SeedArgs(count=5)
        assert self.plugins.validate_args("feeder", "Seeds", None, phase=Phase.ACTIVE).count == 3

    def test_unknown_names_are_refused_with_what_is_installed(self) -> None:
        with pytest.raises(InvalidArgument) as error:
            self.plugins.validate_args(
                "feeder", "Sedes", {}, phase="active", name_field="inputs.events.dirac:Feeder.name"
            )
        (violation,) = error.value.violations
        assert violation.field == "inputs.events.dirac:Feeder.name"
        assert "no feeder named 'Sedes' is installed (installed feeders: Context, Seeds)" in str(
            error.value
        )
        with pytest.raises(InvalidArgument, match="a packer name is a string"):
            self.plugins.validate_args(PluginKind.PACKER, 7, {}, phase="active")

    def test_args_failing_the_model_are_refused_with_field_paths(self) -> None:
        with pytest.raises(InvalidArgument) as error:
            self.plugins.validate_args(
                "feeder", "Seeds", {"count": -1, "cuont": 2}, phase="active", args_field="a"
            )
        assert sorted(v.field for v in error.value.violations) == ["a.count", "a.cuont"]
        with pytest.raises(InvalidArgument, match="must be an object"):
            self.plugins.validate_args("feeder", "Seeds", [1], phase="active")

    def test_the_phase_rule_refuses_what_only_a_scout_contradicts(self) -> None:
        self.plugins.validate_args("feeder", "Seeds", {"count": 5}, phase="active")
        with pytest.raises(InvalidArgument) as error:
            self.plugins.validate_args(
                "feeder", "Seeds", {"count": 5}, phase="scouting", args_field="feeder_args"
            )
        (violation,) = error.value.violations
        assert violation.field == "feeder_args.scouting_count"
        assert violation.description == "while scouting: a scout needs a sample size"
        self.plugins.validate_args("feeder", "Context", {}, phase="active")
        with pytest.raises(InvalidArgument, match="a scout needs a sample"):
            self.plugins.validate_args("feeder", "Context", {}, phase="scouting")

    def test_a_hook_bound_at_another_point_is_refused(self) -> None:
        self.plugins.validate_args("hook", "Retry", {}, phase="active", point="HandleFailedInput")
        with pytest.raises(InvalidArgument, match="serves HandleFailedInput, it cannot be bound"):
            self.plugins.validate_args("hook", "Retry", {}, phase="active", point="WorkgraphActive")
