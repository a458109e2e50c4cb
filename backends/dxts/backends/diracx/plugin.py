"""The DiracX adaptor created in process (entry point `dxts.backends`: `diracx`): compute
parcels become jobs of the DiracX installation at the site's URL, as the adaptor's own DiracX
identity (DXTS_DIRACX_*)."""

from __future__ import annotations

import logging
import os
import sys

from dxts.backends.diracx.edge.client import DiracXClient
from dxts.backends.diracx.logic.adaptor import DiracXAdaptor
from dxts.backends.diracx.payload import STORAGE_ELEMENTS_VARIABLE, STORAGE_ENDPOINTS_VARIABLE
from dxts.backends.diracx.settings import PAYLOAD_MODULE, DiracXSettings
from dxts.backends.plugins import Created, Site
from dxts.core.states import Kind
from dxts.core.storage import parse_endpoints

log = logging.getLogger(__name__)


def settings(site: Site) -> DiracXSettings:
    """Its credentials from DXTS_DIRACX_*, its jobs' payloads run by this Python (unless
    DXTS_DIRACX_PAYLOAD_COMMAND says otherwise) and told to use the site's storage elements and
    catalogue, and the installation's XRootD SEs (DXTS_STORAGE_ENDPOINTS, in the JDL-safe form
    the payload reads): a worker on this machine, such as the test pilot."""
    if site.url is None:
        raise ValueError("the DiracX adaptor needs the installation's URL")
    environment = {
        "DXTS_LOCAL_STORAGE_ROOT": str(site.storage_root),
        STORAGE_ELEMENTS_VARIABLE: ":".join(site.storage_elements),
        "DXTS_LOCAL_OUTPUT_SE": site.storage_elements[0],
    }
    if site.catalogue_url:
        environment["DXTS_CATALOGUE_URL"] = site.catalogue_url
    endpoints = parse_endpoints(os.environ.get("DXTS_STORAGE_ENDPOINTS", ""))
    if endpoints:
        environment[STORAGE_ENDPOINTS_VARIABLE] = " ".join(
            f"{endpoint.key}={endpoint.base}" for endpoint in endpoints.values()
        )
    chosen = DiracXSettings(url=site.url, work_dir=site.data_dir / "diracx")
    if "payload_command" not in chosen.model_fields_set:
        chosen.payload_command = [sys.executable, "-m", PAYLOAD_MODULE]
    chosen.payload_environment = {**environment, **chosen.payload_environment}
    return chosen


def create(site: Site, kind: Kind) -> Created:
    if kind is not Kind.COMPUTE:
        raise ValueError("the DiracX adaptor runs compute parcels only")
    chosen = settings(site)
    log.info("compute parcels become jobs of DiracX at %s as %s", chosen.url, chosen.username)
    return Created(DiracXAdaptor(chosen, DiracXClient.for_settings(chosen)), chosen.name)
