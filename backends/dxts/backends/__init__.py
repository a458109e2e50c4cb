"""Backend adaptors (docs/adaptors.md): small gRPC servers implementing `BackendAdaptorService`
beside the system they drive, knowing nothing of transformations or the database.

The kit, what every adaptor shares:

* `logic` — the `Adaptor` protocol every adaptor implements, on the contract's domain types
  (`dxts.core.adaptor`), with the rules it must keep;
* `edge` — the contract: `servicer` (BackendAdaptorService over any `Adaptor`) and
  `dispatcher_client` (the push path's ReportOutcomes);
* `store` — the small SQLite database a stateful adaptor keeps (its idempotent Submit);
* `runner` — running a compute parcel with cwltool (staging, outputs, usage), wherever it runs;
* `component` — an adaptor as a component of the shell every server runs in (`adaptor_component`);
* `plugins` — adaptors created in process by entry point (`dxts.backends`), as `dxts up` does.

The adaptors, each laid out by module (its `store` holds its SQL, the rest is logic):
`local` (cwltool and data requests on this machine), `null` (accepts and completes without
running anything), `slurm` (jobs of a Slurm cluster), `diracx` (jobs of a DiracX installation).

The status report (docs/cwl.md) is the process output whose CWL id is `status-report`: an
adaptor returns its JSON content as the outcome's `status_report_json`, not as a manifest file.
A process that wants the ids of the inputs it reports on declares an input `dxts-input-ids`
(a string array), which the local adaptor fills from the parcel's submission.
"""
