"""The four calls of a backend adaptor, in domain terms: what the dispatcher calls and what
every adaptor implements (`dxts.backends.logic.adaptor.Adaptor` adds its lifecycle).

The rules every implementation keeps, whatever system it drives:

* **Submit is idempotent by ParcelID.** `submit(payload, parcels)` answers one `SubmitResult`
  per parcel, in order. A ParcelID accepted once is accepted again with the same identifier and
  nothing new is started, for as long as the adaptor can be asked (a restart included, unless
  the adaptor documents otherwise): the dispatcher re-submits whatever it did not see answered.
  A parcel that cannot be taken now (capacity, a malformed submission, a key cancelled before
  it was accepted) is REFUSED with a reason; a refused key may be submitted again later, except
  a cancelled one, which stays refused for good. Every parcel of one call shares `payload`.
* **Poll answers only terminal outcomes.** `poll(identifiers)` returns the outcome of each
  identifier whose work has ended (SUCCEEDED, FAILED or CANCELLED, naming its parcel and
  identifier), nothing for work still running, and lists the identifiers it does not know. The
  same outcome may be asked for and returned any number of times.
* **Cancel is best effort and idempotent.** `cancel(identifiers, parcel_ids)` asks work to
  stop; its end is still reported by `poll` (CANCELLED, or whatever it ended as). A ParcelID
  cancelled by key answers its identifier when the adaptor had accepted it, else "" — and the
  key is then refused for good, so that a late Submit cannot start it.
* **GetLogs** (`logs(identifier, max_bytes)`) hands a person the end of a job's stdout and
  stderr (at most `max_bytes` of each, `DEFAULT_LOG_BYTES` when 0) and where its files are;
  NotFound for an identifier it does not know, FailedPrecondition when it keeps none.
* **Describe** says what the adaptor is: its kind, whether it reports outcomes itself (PUSH,
  through `DispatcherService.ReportOutcomes`) or waits to be polled (PULL), its capacity (0:
  none declared), and counters for operators.

Every call may be repeated after a timeout; the dispatcher relies on that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dxts.core.adaptor.model import (
    CancelResult,
    Description,
    JobLogs,
    Payload,
    PollResult,
    Submission,
    SubmitResult,
)


class BackendAdaptor(Protocol):
    async def describe(self) -> Description: ...

    async def submit(
        self, payload: Payload, parcels: Sequence[Submission]
    ) -> list[SubmitResult]: ...

    async def poll(self, identifiers: Sequence[str]) -> PollResult: ...

    async def cancel(
        self, identifiers: Sequence[str], parcel_ids: Sequence[str]
    ) -> CancelResult: ...

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs: ...
