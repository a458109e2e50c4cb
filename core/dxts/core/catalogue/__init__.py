"""The file catalogue: the interface feeders and the outcome recorder depend on, and dxts's own
local implementation (`LocalFileCatalogue`). See `interface` for the query vocabulary and the
watermark, `local` for what the local watermark guarantees."""

from dxts.core.catalogue.interface import (
    CatalogueFile,
    CataloguePage,
    CatalogueSettings,
    FileCatalogue,
    Range,
    Registered,
    load_catalogue,
    open_catalogue,
    parse_where,
)
from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.catalogue.scoped import FileScope, ScopedCatalogue, files_of

__all__ = [
    "CatalogueFile",
    "CataloguePage",
    "CatalogueSettings",
    "FileCatalogue",
    "FileScope",
    "LocalFileCatalogue",
    "Range",
    "Registered",
    "ScopedCatalogue",
    "files_of",
    "load_catalogue",
    "open_catalogue",
    "parse_where",
]
