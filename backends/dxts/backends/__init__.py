"""Backend adaptors (docs/adaptors.md): small gRPC servers implementing `BackendAdaptorService`
beside the system they drive, knowing nothing of transformations or the database.

The kit, what every adaptor shares, laid out as the services are:

* `edge/` — the contract: `servicer` (BackendAdaptorService over any `Adaptor`) and
  `dispatcher_client` (the push path's ReportOutcomes);
* `logic/` — `adaptor`: the `Adaptor` protocol every adaptor implements, on the contract's domain
  types (`dxts.core.adaptor`), with the rules it must keep;
* `store/` — `state`: the small SQLite database a stateful adaptor keeps (its idempotent Submit);
* `runner/` — running a compute parcel with cwltool (staging, outputs, usage), wherever it runs;
* `component` — an adaptor as a component of the shell every server runs in (`adaptor_component`);
* `plugins` — adaptors created in process by entry point (`dxts.backends`), as `dxts up` does.

The adaptors: `local` (cwltool and data requests on this machine), `null` (accepts and completes
without running anything), `slurm` (jobs of a Slurm cluster), `diracx` (jobs of a DiracX
installation). Each package holds its `logic/` (the adaptor and what it decides), its `store/`
(its SQL, when it keeps state), its `edge/` (the system it drives, when it reaches one over the
network or its commands), and at its top its entry points (`__main__`, `plugin`, `settings`, a
module a node or a worker runs); tests/test_layout.py holds each to the layer rules
(docs/adaptors.md, "Laying out an adaptor").

The status report (docs/cwl.md) is the process output whose CWL id is `status-report`: an
adaptor returns its JSON content as the outcome's `status_report_json`, not as a manifest file.
A process that wants the ids of the inputs it reports on declares an input `dxts-input-ids`
(a string array), which the local adaptor fills from the parcel's submission.
"""
