"""The attention gauges (`dxts.definition.metrics`), measured by a sweep of the definition
component every `attention_metrics_interval_s`: every workgraph not ended, page by page, read
with the same rules as `dxts list`, counted per VO and kind. A (VO, kind) seen before and not
now is set to 0, so an alert clears when the reason goes.
"""

from __future__ import annotations

from collections import Counter

from dxts.core.db import Database
from dxts.core.identity import Identity
from dxts.core.states import WorkgraphStatus
from dxts.definition import metrics
from dxts.definition.logic import queries
from dxts.definition.logic.attention import AttentionRules, attention_of

W = WorkgraphStatus
ENDED = frozenset({W.COMPLETED, W.ARCHIVING, W.ARCHIVED, W.CANCELLED})
RUNNING = tuple(s.value for s in W if s not in ENDED)
PAGE = 100
# Every VO, as dxts's own components read (`queries.Viewer.all_vos`).
OWN = queries.Viewer(Identity("dxts", "dxts-definition", frozenset({"service"})))


class AttentionGauges:
    """Sets the gauges from one pass over the running workgraphs per round."""

    def __init__(self, database: Database, rules: AttentionRules) -> None:
        self.database = database
        self.rules = rules
        self._seen: set[tuple[str, str]] = set()
        self._vos: set[str] = set()

    async def measure(self) -> int:
        """One pass; 0 (it is paced by its interval, never hurried by its own work)."""
        items: Counter[tuple[str, str]] = Counter()
        needing: Counter[str] = Counter()
        share: dict[str, float] = {}
        after: bytes | None = None
        while True:
            page = await queries.list_workgraphs(
                self.database,
                OWN,
                queries.WorkgraphFilters(statuses=RUNNING),
                limit=PAGE,
                after=after,
            )
            found = await attention_of(self.database, self.rules, workgraphs=page.items)
            for w in page.items:
                listed = found.workgraphs.get(w.workgraph_id, [])
                needing[w.vo] += bool(listed)
                items.update((w.vo, i.kind) for i in listed)
                share.setdefault(w.vo, 0.0)
                for t in w.transformation_ids:
                    share[w.vo] = max(share[w.vo], found.failed_share.get(t, 0.0))
            if page.last is None:
                break
            after = page.last
        for key in self._seen - set(items):
            metrics.ATTENTION_ITEMS.labels(*key).set(0)
        for key, count in items.items():
            metrics.ATTENTION_ITEMS.labels(*key).set(count)
        for vo in self._vos | set(share):
            metrics.WORKGRAPHS_NEEDING_ATTENTION.labels(vo).set(needing.get(vo, 0))
            metrics.FAILED_PARCEL_SHARE.labels(vo).set(share.get(vo, 0.0))
        self._seen |= set(items)
        self._vos |= set(share)
        return 0
