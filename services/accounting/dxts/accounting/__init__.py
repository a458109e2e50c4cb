"""dxts.accounting: exact counts, summaries and logs, and the counters' upkeep.

* `edge` — `servicer` (AccountingService: GetCounts, GetWorkgraphSummary, GetStorageSummary,
  ListLog, Rebuild), `mapping` (domain results to replies), `definition_client` (workgraph
  members, asked of the definition service over gRPC).
* `logic` — `counts`, `log_listing`, `repair` (rebuilds and the drift watch), `members` (the
  MemberLister port), `sweeps` (fold each counter, metrics, drift watch and scoped repair).
* `store` — every query: `counts`, `logs`, `health`.
* `metrics`; `component.build_accounting` — the service and sweeps assembled, for
  `dxts-accounting` (`__main__`) and for `dxts up`.
"""

from dxts.accounting.component import Accounting, build_accounting
from dxts.accounting.settings import AccountingSettings

__all__ = ["Accounting", "AccountingSettings", "build_accounting"]
