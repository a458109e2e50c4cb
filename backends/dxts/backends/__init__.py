"""Backend adaptors (DISPATCH.md): small gRPC servers implementing `BackendAdaptorService`
beside the system they drive, knowing nothing of transformations or the database.

* `logic` — the `Adaptor` protocol every adaptor implements, on the contract's domain types
  (`dxts.core.adaptor`), with the rules it must keep;
* `edge` — what every adaptor shares at the contract: `servicer` (BackendAdaptorService over any
  `Adaptor`) and `dispatcher_client` (the push path's ReportOutcomes);
* `component` — an adaptor as a component of the shell every server runs in (`adaptor_component`);
* `local` — runs CWL with cwltool and data requests on this machine (`dxts-backend-local`),
  its own state in `local.store`;
* `null` — accepts and completes without running anything (`dxts-backend-null`).

The status report (DISPATCH.md) is the process output whose CWL id is `status-report`: an
adaptor returns its JSON content as the outcome's `status_report_json`, not as a manifest file.
A process that wants the ids of the inputs it reports on declares an input `dxts-input-ids`
(a string array), which the local adaptor fills from the parcel's submission.
"""
