"""The chart's `auth.diracx`: every server trusts the DiracX installation's tokens with the
settings the values give, read back by the settings class the servers read them with; without a
URL nothing of it is rendered; a role table giving a DiracX user a component's role, or a URL
without VOs, fails the install."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chart_render import VALUES, Helm, containers, of_kind

from dxts.core.grpc.diracx_issuer import DiracXIssuer
from dxts.core.settings import DiracXAuthSettings

DIRACX_AUTH = VALUES / "diracx-auth.yaml"
SERVERS = ("definition", "execution", "accounting", "dispatcher")


def server_env(manifests: list[dict[str, Any]], component: str) -> dict[str, str]:
    deployments = of_kind(manifests, "Deployment")
    (name,) = [name for name in deployments if name.endswith(f"-{component}")]
    (container,) = containers(deployments[name]["spec"]["template"]["spec"])
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def test_every_server_trusts_the_diracx_installation(
    helm: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    lint = helm.run("lint", "--strict", "helm/dxts", "--values", str(DIRACX_AUTH))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    manifests = helm.render([DIRACX_AUTH])
    for component in SERVERS:
        env = server_env(manifests, component)
        diracx = {k: v for k, v in env.items() if k.startswith("DXTS_AUTH_DIRACX_")}
        assert diracx == {
            "DXTS_AUTH_DIRACX_URL": "https://diracx.example.org",
            "DXTS_AUTH_DIRACX_VOS": '["lhcb","belle2"]',
            "DXTS_AUTH_DIRACX_KEYS_REFRESH_S": "120",
            "DXTS_AUTH_DIRACX_GROUP_ROLES": '{"lhcb_prmgr":["operator"]}',
        }, component
        # dxts's own key still verifies the components' tokens beside DiracX's.
        assert env["DXTS_AUTH_PUBLIC_KEY_FILE"].startswith("/etc/dxts/auth/")
    for name, value in server_env(manifests, "definition").items():
        monkeypatch.setenv(name, value)
    settings = DiracXAuthSettings()
    issuer = DiracXIssuer(settings)
    assert (issuer.url, issuer.vos, issuer.keys_refresh_s) == (
        "https://diracx.example.org",
        {"lhcb", "belle2"},
        120.0,
    )
    assert issuer.group_roles == {"lhcb_prmgr": {"operator"}}
    # No property table in the values: the defaults.
    assert issuer.property_roles["ProductionManagement"] == {"operator"}


def test_without_a_url_no_diracx_setting_is_rendered(helm: Helm) -> None:
    manifests = helm.render([])
    for component in SERVERS:
        assert not any(k.startswith("DXTS_AUTH_DIRACX_") for k in server_env(manifests, component))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            "auth: {diracx: {url: 'https://diracx.example.org', vos: [lhcb],"
            " propertyRoles: {NormalUser: [service]}}}",
            "/auth/diracx/propertyRoles/NormalUser/0",
        ),
        (
            "auth: {diracx: {url: 'https://diracx.example.org', vos: [lhcb],"
            " groupRoles: {lhcb_user: [dispatcher]}}}",
            "/auth/diracx/groupRoles/lhcb_user/0",
        ),
        ("auth: {diracx: {url: 'https://diracx.example.org'}}", "auth.diracx.vos: name the VOs"),
        ("auth: {diracx: {url: 'diracx.example.org', vos: [lhcb]}}", "'/auth/diracx/url'"),
    ],
)
def test_mistakes_fail_the_install(helm: Helm, tmp_path: Path, values: str, message: str) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(values)
    result = helm.template([path])
    assert result.returncode != 0, f"rendered despite: {values}"
    assert message in result.stderr, result.stderr
