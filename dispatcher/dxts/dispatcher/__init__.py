"""The dispatcher (DISPATCH.md): claims Unassigned parcels, submits them to backend adaptors,
and brings the adaptors' outcomes back to execution.

* `dispatch` — claim (SKIP LOCKED, key order), sidecar, submit, record; recovery of stale
  Reserved parcels by idempotent re-submission.
* `forwarding` — polling, the push path, cancellations (the `cancel_requested` annotation).
* `payloads` — process trees from the definition service, resolved-hints sidecars, the
  per-(process, sidecar) payload cache; `outcomes` — the outcome sink and the checks.
* `policy` — which backend a parcel goes to; `settings`; `db` (all SQL); `servicer`;
  `component` (assembly and sweeps); `__main__` (`dxts-dispatcher`).
"""
