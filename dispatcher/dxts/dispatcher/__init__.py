"""The dispatcher (docs/dispatching.md): claims Unassigned parcels, submits them to backend
adaptors, and brings the adaptors' outcomes back to execution.

* `logic` — on domain types (`dxts.core.adaptor.model` for what crosses the adaptor contract):
  `dispatch` (claim, sidecar, submit, record; recovery of stale Reserved parcels by idempotent
  re-submission), `forwarding` (polling, the push path, cancellations), `payloads` (process
  trees, resolved-hints sidecars, the per-(process, sidecar) payload cache), `outcomes` (the
  outcome sink and the checks), `policy` (which backend a parcel goes to), `backends` (a
  backend as the dispatcher sees it).
* `store` — all SQL: `claiming`, `recording`, `identifiers`, `forwarding`, `transitions`.
* `edge` — `servicer` (DispatcherService), `backends` (the adaptors' gRPC clients), `clients`
  (the definition and execution services).
* `settings`; `metrics`; `component` (assembly and sweeps); `__main__` (`dxts-dispatcher`).
"""
