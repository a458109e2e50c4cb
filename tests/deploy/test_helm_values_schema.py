"""values.schema.json and the chart's own checks turn value mistakes into a failed
`helm template` (hence a failed install) with a message that names the mistake."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from chart_render import CHART, VALUES, Helm


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param("backends:\n  - name: condor\n", "/backends/0/name", id="unknown-backend"),
        pytest.param(
            "backends:\n  - name: slurm\n",
            "missing properties 'slurm', 'storage'",
            id="slurm-without-its-cluster",
        ),
        pytest.param("backends:\n  - name: null\n", "/backends/0/name", id="unquoted-null-backend"),
        pytest.param("dispatcher:\n  replicas: -1\n", "/dispatcher/replicas", id="negative"),
        pytest.param("execution:\n  replicas: -3\n", "/execution/replicas", id="negative-exec"),
        pytest.param(
            "backends:\n  - name: local\n    replicas: -1\n",
            "/backends/0/replicas",
            id="negative-backend",
        ),
        pytest.param("replicas: 3\n", "'replicas' not allowed", id="unknown-top-level-key"),
        pytest.param("config:\n  defaults: {}\n", "'defaults' not allowed", id="config-section"),
        pytest.param(
            "config:\n  installation:\n    pakcer: {name: BySize}\n",
            "'pakcer' not allowed",
            id="config-layer-field",
        ),
        pytest.param(
            "config:\n  backend_policy:\n    compute: {route: {backend: b, fraction: 2}}\n",
            "/config/backend_policy/compute",
            id="config-policy",
        ),
        pytest.param(
            "backends:\n  - name: local\n    reportMode: push\n",
            "/backends/0",
            id="local-adaptor-does-not-push",
        ),
        pytest.param(
            "storageEndpoints:\n  SITE: root://h:1094/relative\n",
            "/storageEndpoints/SITE",
            id="storage-endpoint-single-slash",
        ),
        pytest.param(
            "catalogue:\n  existingSecret: c\n  url: mysql+asyncmy://u:p@h/c\n",
            "set catalogue.existingSecret or catalogue.url, not both",
            id="two-catalogue-sources",
        ),
        pytest.param(
            "dispatcher:\n  autoscaling:\n    enabled: true\n",
            "'autoscaling' not allowed",
            id="dispatcher-has-no-autoscaler",
        ),
        pytest.param(
            "backends:\n  - name: local\n  - name: local\n", "listed twice", id="duplicate"
        ),
        pytest.param(
            "database:\n  existingSecret: db\nmariadb:\n  enabled: true\n"
            "  password: p\n  rootPassword: r\n",
            "mariadb.enabled (trial database) excludes",
            id="trial-and-external-database",
        ),
        pytest.param(
            "mariadb:\n  enabled: true\n  rootPassword: r\n",
            "mariadb.password is required",
            id="trial-without-password",
        ),
        pytest.param(
            "execution:\n  autoscaling:\n    enabled: true\n    minReplicas: 5\n"
            "    maxReplicas: 2\n",
            "minReplicas is above maxReplicas",
            id="autoscaler-bounds",
        ),
    ],
)
def test_mistakes_fail_the_render(helm: Helm, tmp_path: Path, values: str, message: str) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(values)
    result = helm.template([path])
    assert result.returncode != 0, f"rendered despite: {values}"
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize("path", [CHART / "values.yaml", *sorted(VALUES.glob("*.yaml"))])
def test_shipped_values_satisfy_the_schema(path: Path) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.Draft7Validator(schema).validate(yaml.safe_load(path.read_text()))


def test_every_top_level_value_is_in_the_schema() -> None:
    """Top-level keys are closed in the schema, so each default must be declared there."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert schema["additionalProperties"] is False
    assert set(defaults) <= set(schema["properties"])
