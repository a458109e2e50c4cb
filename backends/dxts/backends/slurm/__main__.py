"""`dxts-backend-slurm`: the Slurm adaptor as a process (settings: `DXTS_SLURM_*`, the file
catalogue's `DXTS_CATALOGUE_*`, and Slurm's own SLURM_CONF for the cluster it submits to)."""

from __future__ import annotations

from dxts.backends.component import run_adaptor
from dxts.backends.slurm.adaptor import SlurmAdaptor
from dxts.backends.slurm.settings import SlurmSettings
from dxts.core.catalogue import load_catalogue


def main() -> None:
    run_adaptor(
        "slurm", lambda: SlurmAdaptor(SlurmSettings(), load_catalogue(), owns_catalogue=True)
    )


if __name__ == "__main__":
    main()
