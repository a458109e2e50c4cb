"""The accounting service's Prometheus metrics (default registry, served by
`dxts.core.grpc.start_metrics_server`), and the collection the metrics sweep runs.

Journal depth and the age of its oldest row say whether the folds keep up (a fold that stops
makes reads slower, never wrong); the InnoDB history list length says whether long
transactions hold back purge; `dxts_counter_negative` is the drift alarm: any value above zero
means a counter disagrees with its tables.
"""

from __future__ import annotations

from prometheus_client import Counter as PromCounter
from prometheus_client import Gauge, Histogram

from dxts.accounting.store.health import history_list_length, journal_health
from dxts.core.counters import Counter
from dxts.core.db import Database

JOURNAL_ROWS = Gauge(
    "dxts_counter_journal_rows", "Journal rows not folded yet, per counter.", ["counter"]
)
JOURNAL_OLDEST_AGE = Gauge(
    "dxts_counter_journal_oldest_age_seconds",
    "Age of the oldest journal row not folded yet (0 when the journal is empty), per counter.",
    ["counter"],
)
FOLD_SECONDS = Histogram(
    "dxts_counter_fold_seconds", "Duration of one fold transaction, per counter.", ["counter"]
)
ROWS_FOLDED = PromCounter(
    "dxts_counter_folded_rows", "Journal rows folded into the counters, per counter.", ["counter"]
)
NEGATIVE = Gauge(
    "dxts_counter_negative",
    "Keys whose value is negative (drift), per counter, as last seen; non-zero is an alert.",
    ["counter"],
)
CORRECTIONS = PromCounter(
    "dxts_counter_corrections",
    "Keys corrected by rebuilds (drift repairs and operator requests), per counter.",
    ["counter"],
)
HISTORY_LIST_LENGTH = Gauge(
    "dxts_innodb_history_list_length",
    "InnoDB history list length (undo records not yet purged); MariaDB/MySQL only.",
)


async def collect(database: Database, counters: tuple[Counter, ...]) -> None:
    """Refresh the journal and InnoDB gauges from the database. Each counter's folded rows and
    corrections are exported from the first collection on, at zero until they happen: a series
    that appears only with its first increment hides that increment from `rate()` and alerts."""
    for counter in counters:
        ROWS_FOLDED.labels(counter=counter.name)
        CORRECTIONS.labels(counter=counter.name)
        health = await journal_health(database, counter)
        JOURNAL_ROWS.labels(counter=counter.name).set(health.depth)
        JOURNAL_OLDEST_AGE.labels(counter=counter.name).set(health.oldest_age_s)
    length = await history_list_length(database)
    if length is not None:
        HISTORY_LIST_LENGTH.set(length)
