"""The local adaptor: runs each compute parcel's CWL process with cwltool on this machine, and
data requests between local storage-element directories. `dxts-backend-local` serves it."""
