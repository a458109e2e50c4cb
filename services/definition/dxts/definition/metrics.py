"""The definition service's Prometheus metrics (default registry, served by the component's
shell when DXTS_METRICS_PORT is set): attention, measured by a sweep over every running
workgraph (`logic.attention_metrics`), so that an alert sees what `dxts list` would show.
"""

from __future__ import annotations

from prometheus_client import Gauge

ATTENTION_ITEMS = Gauge(
    "dxts_attention_items",
    "Reasons running workgraphs and their members need a person now, per VO and kind "
    "(problematic-inputs, failure-rate, no-progress, action-failed, backend-lost, "
    "backend-refused).",
    ["vo", "kind"],
)
WORKGRAPHS_NEEDING_ATTENTION = Gauge(
    "dxts_workgraphs_needing_attention",
    "Running workgraphs with at least one attention item, per VO.",
    ["vo"],
)
FAILED_PARCEL_SHARE = Gauge(
    "dxts_failed_parcel_share",
    "The highest share of failed parcels among a running member's last ended parcels (the "
    "attention window), per VO.",
    ["vo"],
)
