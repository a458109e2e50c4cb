"""The kernel every service is built on: one command protocol and one sweep runner.

* `commands` — every mutating RPC runs as lock → authorise → request-id check → apply → log, so
  a retried request is answered from the log instead of being applied twice, whatever the
  service.
* `sweeps` — every periodic loop (feeding, packing, completion, dispatching, folding, the
  lifecycle) runs through one runner with the same pacing, error backoff, graceful stop and
  metrics.
"""
