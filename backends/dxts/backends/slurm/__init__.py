"""The Slurm adaptor: each compute parcel a task of a Slurm job array on a real cluster, its
files on storage the nodes share (`backend` says how; `dxts-backend-slurm` serves it)."""
