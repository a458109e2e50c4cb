"""The open slot: adaptors a composition root creates in its own process, found by entry point.

An adaptor package registers a factory in the entry point group `dxts.backends` under its
adaptor type (`local = "dxts.backends.local.plugin:create"`); `dxts up --backend NAME` creates
its compute adaptor (and the local data adaptor) this way, so that a new adaptor, shipped as a
package of its own, needs no change anywhere else: its identifiers go to the dispatcher's one
identifier table under the entry point's name, its settings and its own process entry
(`dxts-backend-NAME`) are its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol

from dxts.backends.logic.adaptor import Adaptor
from dxts.core.catalogue import FileCatalogue
from dxts.core.states import Kind

ENTRY_POINT_GROUP = "dxts.backends"


@dataclass(frozen=True)
class Site:
    """What the composition root offers an adaptor it creates: where its state goes, the file
    catalogue and storage elements the parcels' files live on, and the options given for it."""

    data_dir: Path  # the adaptor keeps its state in a directory of its own under this one
    catalogue: FileCatalogue
    storage_root: Path  # <storage_root>/<storage element>/<LFN>
    storage_elements: tuple[str, ...]  # outputs are written to the first
    workers: int = 2  # parcels run at once, for an adaptor that runs them here
    catalogue_url: str | None = None  # the catalogue's URL, for work that opens it elsewhere
    url: str | None = None  # the system the adaptor drives, when one is named (--backend-url)
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Created:
    """An adaptor created for the composition root, and the backend name it serves under."""

    adaptor: Adaptor
    name: str  # Parcels.Backend


class AdaptorFactory(Protocol):
    """What an entry point of `dxts.backends` loads: an adaptor of `kind` over `site`."""

    def __call__(self, site: Site, kind: Kind) -> Created: ...


def adaptor_types() -> list[str]:
    """The adaptor types installed, by entry point name."""
    return sorted({point.name for point in entry_points(group=ENTRY_POINT_GROUP)})


def create(adaptor_type: str, site: Site, kind: Kind) -> Created:
    """An adaptor of the installed type `adaptor_type` (KeyError: none is installed)."""
    for point in entry_points(group=ENTRY_POINT_GROUP, name=adaptor_type):
        factory: AdaptorFactory = point.load()
        return factory(site, kind)
    raise KeyError(f"no adaptor {adaptor_type!r} installed (known: {', '.join(adaptor_types())})")
