"""The definition service's logic, on domain types (never generated messages, never gRPC).

* submission (`submit`, `jobs`), the reads (`queries`) and the process registry (`registry`);
* the operator commands: `workgraph_commands`, `transformation_commands`, `actions` (force and
  reset), over the locked reads (`locked`), the caller's rights (`authorise`) and the transition
  primitives (`moves`) that the lifecycle engine shares;
* the lifecycle engine (`lifecycle`).

A command is one READ COMMITTED transaction that

1. locks the workgraph row (`SELECT ... FOR UPDATE`; a member's command locks its workgraph
   first, then the member), so all status changes of one workgraph are serialised;
2. checks the caller's rights: a caller from another VO is told NOT_FOUND (existence is not
   leaked), a plain user may steer only what it owns, the operator role anything of its VO;
3. checks the state machine (`StateMachine.check` with the actor taking the edge; a standalone
   transformation takes its workgraph's edges itself, by operator);
4. applies it: conditional UPDATEs whose row counts are the truth, the member fan-out of
   `MEMBER_FAN_OUT`, the reset of the entered state's action results, and the log rows (their
   Data carries the request id, which is how a retried command is recognised and answered
   without being applied twice).

Forwarded work (a flush, the input and parcel half of a halt) is asked of execution after the
commit, with request ids derived from the command's, so a retry forwards the same requests.
"""
