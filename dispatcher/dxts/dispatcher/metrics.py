"""The dispatcher's Prometheus metrics (served with the gRPC ones by `start_metrics_server`)."""

from prometheus_client import Counter, Gauge

CLAIMED = Counter("dxts_dispatcher_claimed", "Parcels claimed (Unassigned → Reserved).", ["kind"])
SUBMITTED = Counter(
    "dxts_dispatcher_submitted", "Parcels a backend accepted and that were recorded.", ["backend"]
)
REFUSED = Counter("dxts_dispatcher_refused", "Parcels a backend refused.", ["backend"])
RECOVERED = Counter(
    "dxts_dispatcher_recovered", "Stale Reserved parcels re-submitted by recovery.", ["backend"]
)
UNREACHABLE = Counter(
    "dxts_dispatcher_backend_unreachable",
    "Adaptor calls that failed or timed out, by call.",
    ["backend", "call"],
)
OUTCOMES = Counter(
    "dxts_dispatcher_outcomes",
    "Outcomes forwarded to execution, by what execution answered.",
    ["backend", "disposition"],
)
BAD_OUTCOMES = Counter(
    "dxts_dispatcher_bad_outcomes",
    "Outcomes an adaptor reported that could not be used as reported, by reason.",
    ["backend", "reason"],
)
CANCELS = Counter("dxts_dispatcher_cancels", "Parcels the dispatcher asked to cancel.", ["backend"])
IN_FLIGHT = Gauge("dxts_dispatcher_in_flight", "Parcels Assigned to a backend.", ["backend"])
RESERVED = Gauge("dxts_dispatcher_reserved", "Parcels Reserved for a backend.", ["backend"])
OLDEST_RESERVED = Gauge(
    "dxts_dispatcher_oldest_reserved_age_seconds",
    "Age of the oldest Reserved parcel of a backend (0 when none).",
    ["backend"],
)
