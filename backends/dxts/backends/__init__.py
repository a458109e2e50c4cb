"""Backend adaptors (DISPATCH.md): small gRPC servers implementing `BackendAdaptorService`
beside the system they drive, knowing nothing of transformations or the database.

* `local` — runs CWL with cwltool and data requests on this machine (`dxts-backend-local`);
* `null` — accepts and completes without running anything (`dxts-backend-null`);
* `server` — what every adaptor shares (service registration, the process, Submit answers).

The status report (DISPATCH.md) is the process output whose CWL id is `status-report`: an
adaptor returns its JSON content as the outcome's `status_report_json`, not as a manifest file.
A process that wants the ids of the inputs it reports on declares an input `dxts-input-ids`
(a string array), which the local adaptor fills from the parcel's submission.
"""
