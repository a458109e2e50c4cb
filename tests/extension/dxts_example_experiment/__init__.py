"""An example experiment's dxts plugins, registered under the experiment's own names.

* `LHCbBookkeeping` (feeder): evaluates a bookkeeping query against the file catalogue, with an
  exact watermark bookmark; scouting takes listed runs or a deterministic fraction.
* `ByDescriptorKey` (packer): groups inputs by one descriptor key (a run, a stream).
* `RetryGridFailures` (HandleFailedInput hook): retries known grid failures, halves inputs that
  ran out of CPU time, and sets everything else aside.
* `RemovedFilesHaveNoReplica` (Finalizing action) and `PPGApproval` (Approving sign-off).
"""
