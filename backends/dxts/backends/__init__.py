"""Backend adaptors (DISPATCH.md): small gRPC servers implementing `BackendAdaptorService`
beside the system they drive, knowing nothing of transformations or the database.

* `local` — runs CWL with cwltool and data requests on this machine (`dxts-backend-local`);
* `null` — accepts and completes without running anything (`dxts-backend-null`);
* `server` — what every adaptor shares (service registration, the process, Submit answers).
"""
