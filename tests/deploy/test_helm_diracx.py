"""The chart runs the DiracX adaptor against a DiracX installation: its URL and identity from
values, its DiracX key from a Secret (never a value), its parcel → job record on the storage
volume, and the dispatcher sending it compute parcels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chart_render import VALUES, Helm, containers, of_kind

DIRACX_VALUES = VALUES / "diracx.yaml"
PREFIX = "dx-dxts"


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in container.get("env", [])}


def test_the_diracx_adaptor_reads_its_key_from_the_secret_and_keeps_its_record(
    helm: Helm,
) -> None:
    lint = helm.run("lint", "--strict", "helm/dxts", "--values", str(DIRACX_VALUES))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    manifests = helm.render([DIRACX_VALUES])
    deployment = of_kind(manifests, "Deployment")[f"{PREFIX}-backend-diracx"]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = containers(spec)
    assert container["command"][-1] == "dxts-backend-diracx"
    env = env_of(container)
    assert env["DXTS_DIRACX_URL"]["value"] == "https://diracx.example.org"
    assert (env["DXTS_DIRACX_VO"]["value"], env["DXTS_DIRACX_GROUP"]["value"]) == (
        "lhcb",
        "lhcb_prod",
    )
    assert env["DXTS_DIRACX_USERNAME"]["value"] == "dxts-prod"
    assert env["DXTS_DIRACX_API_KEY"] == {
        "name": "DXTS_DIRACX_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "dxts-diracx-credentials", "key": "legacy-key"}},
    }
    assert json.loads(env["DXTS_DIRACX_POLICY"]["value"]) == {
        "cpu_power": 12.5,
        "banned_sites": ["LCG.Broken.ch"],
    }
    assert json.loads(env["DXTS_DIRACX_PAYLOAD_ENVIRONMENT"]["value"]) == {
        "DXTS_CATALOGUE_IMPLEMENTATION": "dirac"
    }
    work_dir = env["DXTS_DIRACX_WORK_DIR"]["value"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert work_dir.startswith(mounts["storage"] + "/")
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["storage"]["persistentVolumeClaim"] == {"claimName": "dxts-diracx-state"}
    # No Secret of the chart holds the key: the operator's does.
    assert f"{PREFIX}-diracx" not in of_kind(manifests, "Secret")
    dispatcher = of_kind(manifests, "Deployment")[f"{PREFIX}-dispatcher"]
    (dispatcher_container,) = containers(dispatcher["spec"]["template"]["spec"])
    backends = json.loads(env_of(dispatcher_container)["DXTS_BACKENDS"]["value"])
    assert {(b["name"], b["kind"]) for b in backends} == {("diracx", "compute"), ("local", "data")}


def test_a_diracx_adaptor_without_its_url_or_secret_is_refused(helm: Helm, tmp_path: Path) -> None:
    for missing in ("url", "existingSecret"):
        diracx = {"url": "https://diracx.example.org", "existingSecret": "creds"}
        del diracx[missing]
        values = tmp_path / f"without-{missing}.yaml"
        values.write_text(json.dumps({"backends": [{"name": "diracx", "diracx": diracx}]}))
        result = helm.template([values])
        assert result.returncode != 0
        assert missing in result.stderr


def test_only_the_diracx_adaptor_takes_diracx_settings(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "misplaced.yaml"
    values.write_text(
        json.dumps({"backends": [{"name": "local", "diracx": {"url": "u", "existingSecret": "s"}}]})
    )
    assert helm.template([values]).returncode != 0
