"""The local adaptor created in process (entry point `dxts.backends`: `local`): compute parcels
run with cwltool here, data parcels between the site's storage elements."""

from __future__ import annotations

from dxts.backends.local.logic.adaptor import LocalAdaptor
from dxts.backends.local.settings import LocalSettings
from dxts.backends.plugins import Created, Site
from dxts.core.states import Kind


def settings(site: Site, kind: Kind) -> LocalSettings:
    """The local adaptor of one kind, over the site's storage elements."""
    name = "local" if kind is Kind.COMPUTE else "local-data"
    return LocalSettings(
        name=name,
        kind=kind,
        work_dir=site.data_dir / name,
        storage_root=site.storage_root,
        storage_elements=list(site.storage_elements),
        output_se=site.storage_elements[0],
        workers=site.workers,
    )


def create(site: Site, kind: Kind) -> Created:
    chosen = settings(site, kind)
    return Created(LocalAdaptor(chosen, site.catalogue), chosen.name)
