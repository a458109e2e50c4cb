"""The chart's web component (dxts-web): off by default; when enabled one Deployment and one
Service, probed over HTTP, pointed at the three services and the dispatcher it calls, holding
no database credential, locked down like every other dxts pod."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from chart_render import CHART, RELEASE, ROOT, Helm, of_kind

WEB = f"{RELEASE}-dxts-web"
ENABLED = ("--set", "web.enabled=true")


@pytest.fixture(scope="module")
def manifests(helm: Helm) -> list[dict[str, Any]]:
    return helm.render([], *ENABLED)


def test_the_web_view_is_off_by_default(helm: Helm) -> None:
    assert WEB not in of_kind(helm.render([]), "Deployment")


def test_the_chart_with_the_web_view_is_lint_clean(helm: Helm) -> None:
    result = helm.run("lint", str(CHART), "--strict", *ENABLED)
    assert result.returncode == 0, result.stdout + result.stderr


def test_one_replica_of_the_declared_console_script(manifests: list[dict[str, Any]]) -> None:
    deployment = of_kind(manifests, "Deployment")[WEB]
    assert deployment["spec"]["replicas"] == 1  # its sessions live in its memory
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["dxts-web"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["dxts-web"] == "dxts.web.__main__:main"


def test_it_is_probed_over_http_and_its_service_targets_that_port(
    manifests: list[dict[str, Any]],
) -> None:
    deployment = of_kind(manifests, "Deployment")[WEB]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("http", 8080)
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    service = of_kind(manifests, "Service")[WEB]
    assert service["spec"]["ports"] == [
        {
            "name": "http",
            "port": 8080,
            "targetPort": "http",
            "protocol": "TCP",
            "appProtocol": "http",
        }
    ]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_it_calls_the_services_and_holds_no_database_credential(
    manifests: list[dict[str, Any]],
) -> None:
    (container,) = of_kind(manifests, "Deployment")[WEB]["spec"]["template"]["spec"]["containers"]
    env = {entry["name"]: entry for entry in container["env"]}
    services = of_kind(manifests, "Service")
    for peer in ("definition", "execution", "accounting", "dispatcher"):
        host, _, port = env[f"DXTS_{peer.upper()}_ADDRESS"]["value"].rpartition(":")
        assert host == f"{RELEASE}-dxts-{peer}" and host in services
        assert int(port) in {p["port"] for p in services[host]["spec"]["ports"]}
    assert env["DXTS_WEB_LISTEN"]["value"] == "0.0.0.0:8080"
    assert env["DXTS_WEB_SECURE_COOKIES"]["value"] == "true"
    assert not any("DB" in name or "CATALOGUE" in name for name in env)
    assert "secretKeyRef" not in str(container)


def test_it_runs_locked_down(manifests: list[dict[str, Any]]) -> None:
    spec = of_kind(manifests, "Deployment")[WEB]["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True and context["runAsUser"] == 10001
    assert context["capabilities"]["drop"] == ["ALL"]
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/tmp"}
    assert container["resources"]["limits"]["memory"]


def test_a_wrong_web_value_fails_the_render(helm: Helm) -> None:
    result = helm.template([], *ENABLED, "--set", "web.port=0")
    assert result.returncode != 0 and "port" in result.stderr
