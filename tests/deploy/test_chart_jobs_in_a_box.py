"""Jobs in a box, in the chart (docs/security.md): the adaptor pods, whose jobs run user code,
hold no database secret (the catalogue credential they stage inputs with is their own, or
none) and a certificate that names their own Service only (test_chart_tls)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from chart_render import RELEASE, Helm, of_kind
from test_helm_chart import Manifests, env_of

PREFIX = f"{RELEASE}-dxts"
ADAPTOR_CATALOGUE = "mysql+asyncmy://stager:pw@db.example.org:3306/dxts_catalogue"


def adaptor_pods(manifests: Manifests) -> dict[str, dict[str, Any]]:
    return {
        name: doc
        for name, doc in of_kind(manifests, "Deployment").items()
        if name.startswith(f"{PREFIX}-backend-")
    }


def secret_references(doc: dict[str, Any]) -> set[str]:
    """Every Secret a pod reads, by environment or by volume."""
    spec = doc["spec"]["template"]["spec"]
    names = {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
    for container in [*spec["containers"], *spec.get("initContainers", [])]:
        for entry in container.get("env", []):
            reference = entry.get("valueFrom", {}).get("secretKeyRef")
            if reference is not None:
                names.add(reference["name"])
    return names


@pytest.mark.parametrize("value_set", ["default", "external-db", "everything"])
def test_adaptor_pods_get_no_database_secret(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    manifests = rendered[value_set]
    database = {
        ref["valueFrom"]["secretKeyRef"]["name"]
        for doc in of_kind(manifests, "Deployment").values()
        for ref in [env_of(doc["spec"]["template"]["spec"]["containers"][0]).get("DXTS_DB_URL")]
        if ref is not None
    }
    services_catalogue = {
        ref["valueFrom"]["secretKeyRef"]["name"]
        for doc in of_kind(manifests, "Deployment").values()
        if not doc["metadata"]["name"].startswith(f"{PREFIX}-backend-")
        for ref in [
            env_of(doc["spec"]["template"]["spec"]["containers"][0]).get("DXTS_CATALOGUE_URL")
        ]
        if ref is not None
    }
    assert database and services_catalogue
    pods = adaptor_pods(manifests)
    assert pods
    for name, doc in pods.items():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        env = env_of(container)
        assert "DXTS_DB_URL" not in env and "DXTS_CATALOGUE_URL" not in env, name
        assert not secret_references(doc) & (database | services_catalogue), name
        if name.endswith(("-local", "-slurm")):  # they would stage inputs: told there is none
            adaptor = name.rsplit("-", 1)[1].upper()
            assert env[f"DXTS_{adaptor}_CATALOGUE"]["value"] == "false"


def test_adaptors_stage_with_a_catalogue_credential_of_their_own(helm: Helm) -> None:
    manifests = helm.render(
        [],
        "--set",
        f"catalogue.adaptors.url={ADAPTOR_CATALOGUE}",
        "--set",
        "catalogue.url=mysql+asyncmy://dxts:services@db.example.org:3306/dxts_catalogue",
    )
    own = f"{PREFIX}-catalogue-adaptors"
    assert own in of_kind(manifests, "Secret")
    for name, doc in of_kind(manifests, "Deployment").items():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        reference = env_of(container).get("DXTS_CATALOGUE_URL")
        assert ADAPTOR_CATALOGUE not in json.dumps(doc)
        if name == f"{PREFIX}-backend-local":
            assert reference is not None
            assert reference["valueFrom"]["secretKeyRef"] == {"name": own, "key": "url"}
            assert "DXTS_LOCAL_CATALOGUE" not in env_of(container)
        elif reference is not None:  # the services keep theirs
            assert reference["valueFrom"]["secretKeyRef"]["name"] == f"{PREFIX}-catalogue"


def test_each_pod_mounts_its_own_certificate(rendered: dict[str, Manifests]) -> None:
    mounted = {}
    for name, doc in of_kind(rendered["everything"], "Deployment").items():
        volumes = {v["name"]: v for v in doc["spec"]["template"]["spec"]["volumes"]}
        mounted[name] = volumes["tls"]["secret"]["secretName"]
        assert mounted[name] == name.replace(PREFIX, f"{PREFIX}-tls", 1)
    assert len(set(mounted.values())) == len(mounted)


def test_the_local_adaptor_names_its_node_as_the_site_of_its_failures(
    rendered: dict[str, Manifests],
) -> None:
    """The site a failure names (`dxts errors` groups by it) is the Kubernetes node the local
    adaptor runs on, not its pod's host name, which changes with every restart."""
    local = adaptor_pods(rendered["default"])[f"{PREFIX}-backend-local"]
    (container,) = local["spec"]["template"]["spec"]["containers"]
    site = env_of(container)["DXTS_LOCAL_SITE"]
    assert site["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
