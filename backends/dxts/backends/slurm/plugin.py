"""The Slurm adaptor created in process (entry point `dxts.backends`: `slurm`): compute parcels
become jobs of the Slurm cluster SLURM_CONF names, over the site's storage elements (which the
cluster's nodes must share)."""

from __future__ import annotations

from dxts.backends.plugins import Created, Site
from dxts.backends.slurm.edge.commands import Slurm
from dxts.backends.slurm.logic.adaptor import SlurmAdaptor
from dxts.backends.slurm.settings import SlurmSettings
from dxts.core.states import Kind


def create(site: Site, kind: Kind) -> Created:
    if kind is not Kind.COMPUTE:
        raise ValueError("the Slurm adaptor runs compute parcels only")
    settings = SlurmSettings(
        name="slurm",
        work_dir=site.data_dir / "slurm",
        storage_root=site.storage_root,
        storage_elements=list(site.storage_elements),
        output_se=site.storage_elements[0],
    )
    return Created(SlurmAdaptor(settings, site.catalogue, slurm=Slurm(settings)), settings.name)
