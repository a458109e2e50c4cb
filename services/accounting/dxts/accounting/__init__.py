"""dxts.accounting: exact counts, summaries and logs, and the counters' upkeep.

* `servicer` — AccountingService (GetCounts, GetWorkgraphSummary, GetStorageSummary, ListLog,
  Rebuild); `counts`, `log_listing`, `repair` — the logic it calls; `db` — every query.
* `members` — workgraph members, asked of the definition service over gRPC.
* `sweeps` — fold each counter, metrics (`metrics`), drift watch and scoped repair.
* `component.build_accounting` — the service and sweeps assembled, for `dxts-accounting`
  (`__main__`) and for `dxts up`.
"""

from dxts.accounting.component import Accounting, build_accounting
from dxts.accounting.settings import AccountingSettings

__all__ = ["Accounting", "AccountingSettings", "build_accounting"]
