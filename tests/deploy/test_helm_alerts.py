"""The chart's alerting rules: off by default; on, a PrometheusRule whose three alerts read the
gauges the definition service exports, with the durations and threshold given as values."""

from __future__ import annotations

import re

from chart_render import NAMESPACE, RELEASE, Helm, of_kind
from prometheus_client import REGISTRY

import dxts.definition.metrics  # noqa: F401  (registers the gauges the rules read)

ON = ("--set", "metrics.prometheusRule.enabled=true")


def rules(helm: Helm, *extra: str) -> dict[str, dict[str, object]]:
    (rule,) = of_kind(helm.render([], *ON, *extra), "PrometheusRule").values()
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["name"] == f"{RELEASE}-dxts"
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}


def test_no_alerting_rules_unless_asked(helm: Helm) -> None:
    assert not of_kind(helm.render([]), "PrometheusRule")


def test_the_three_alerts_read_the_attention_gauges_of_this_release(helm: Helm) -> None:
    found = rules(helm)
    assert set(found) == {
        "DxtsWorkgraphNeedsAttention",
        "DxtsFailureRateHigh",
        "DxtsBackendLosingParcels",
    }
    assert found["DxtsWorkgraphNeedsAttention"]["for"] == "15m"
    assert found["DxtsFailureRateHigh"]["expr"].endswith("> 0.5")  # type: ignore[union-attr]
    exported = {metric.name for metric in REGISTRY.collect()}
    for alert in found.values():
        expr = str(alert["expr"])
        (metric,) = re.findall(r"\b(dxts_\w+)\{", expr)
        assert metric in exported, f"{alert['alert']} reads {metric}, which nothing exports"
        assert f'namespace="{NAMESPACE}"' in expr
        assert alert["labels"] == {"severity": "warning"}


def test_the_durations_threshold_and_labels_are_values(helm: Helm) -> None:
    found = rules(
        helm,
        "--set",
        "metrics.prometheusRule.attentionFor=30m",
        "--set-json",  # --set would give the number as a string
        "metrics.prometheusRule.failureRate=0.2",
        "--set",
        "metrics.prometheusRule.severity=page",
    )
    assert found["DxtsWorkgraphNeedsAttention"]["for"] == "30m"
    assert str(found["DxtsFailureRateHigh"]["expr"]).endswith("> 0.2")
    assert found["DxtsBackendLosingParcels"]["labels"] == {"severity": "page"}
    refused = helm.template([], *ON, "--set-json", "metrics.prometheusRule.failureRate=2")
    assert refused.returncode != 0 and "failureRate" in refused.stderr
