"""Files in and out of the installation's storage: `dxts file put` and `dxts file get`.

No service carries file contents (the contracts move parcels, outcomes and catalogue entries,
never bytes), so these commands reach the storage the way the adaptors of `dxts up` do: the
storage elements are directories under the installation's storage root (`<root>/<SE>/<LFN>`)
and the file catalogue is the installation's. `dxts up` writes both into its connection file
(`storage`, `storage_elements`, `catalogue`); DXTS_STORAGE_ROOT, DXTS_STORAGE_ELEMENTS and
DXTS_CATALOGUE_URL name them for any other installation whose storage this machine sees.

`put` copies the file to `<root>/<SE>/<LFN>` and registers the LFN with its size, adler32
checksum and the replica; putting the same content under the same LFN again changes nothing,
other content under a registered LFN is refused. `get` copies a replica found through the
catalogue (the first at a storage element under the root) to the destination.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated

import typer

from dxts.cli.connection import Connection
from dxts.core.errors import FailedPrecondition, InvalidArgument

if TYPE_CHECKING:
    from dxts.core.catalogue import CatalogueFile, FileCatalogue

file_app = typer.Typer(no_args_is_help=True, help="Files in and out of the storage elements.")

# Where a file put without an LFN goes: under its content hash, so that the same file put twice
# is one catalogue entry and two different files of one name never collide.
UPLOAD_PREFIX = "/dxts/uploads"


def adler32(path: Path) -> str:
    checksum = 1
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            checksum = zlib.adler32(chunk, checksum)
    return f"adler32:{checksum:08x}"


def upload_lfn(path: Path) -> str:
    """The LFN a file is put under when none is given: its SHA-256 (first 32 hex digits) and
    its own name, so that a runner staging it sees the name it had."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return f"{UPLOAD_PREFIX}/{digest.hexdigest()[:32]}/{path.name}"


@dataclass(frozen=True)
class Storage:
    """The installation's storage root, its storage elements and its catalogue URL."""

    root: Path
    elements: tuple[str, ...]
    catalogue_url: str

    @classmethod
    def of(cls, connection: Connection) -> Storage:
        if not connection.storage or not connection.catalogue:
            raise FailedPrecondition(
                "the storage root and the catalogue are unknown: start `dxts up` (its "
                "connection file names them) or set DXTS_STORAGE_ROOT and DXTS_CATALOGUE_URL"
            )
        elements = tuple(e for e in (connection.storage_elements or "").split(",") if e)
        return cls(Path(connection.storage), elements, connection.catalogue)

    def path(self, storage_element: str, lfn: str) -> Path:
        relative = PurePosixPath(lfn.lstrip("/"))
        if not lfn.startswith("/") or not relative.parts or ".." in relative.parts:
            raise InvalidArgument(f"{lfn!r} is not an absolute LFN", field="lfn")
        return self.root / storage_element / relative

    @contextlib.asynccontextmanager
    async def catalogue(self) -> AsyncIterator[FileCatalogue]:
        """The installation's catalogue, open for a few calls."""
        from dxts.core.catalogue import CatalogueSettings, open_catalogue

        opened = await open_catalogue(CatalogueSettings(url=self.catalogue_url))
        try:
            yield opened
        finally:
            await opened.close()

    async def put(
        self, catalogue: FileCatalogue, local: Path, storage_element: str, lfn: str | None = None
    ) -> str:
        """Copy `local` to the storage element and register it; returns its LFN."""
        entry, target = await asyncio.to_thread(self._entry, local, storage_element, lfn)
        known = (await catalogue.files([entry.lfn])).get(entry.lfn)
        if known is not None and not known.same_file(entry):
            raise FailedPrecondition(f"{entry.lfn} is registered with other content")
        await asyncio.to_thread(_copy_unless_there, local, target, entry.checksum)
        await catalogue.register([entry])
        return entry.lfn

    def _entry(
        self, local: Path, storage_element: str, lfn: str | None
    ) -> tuple[CatalogueFile, Path]:
        """The catalogue entry `local` is put as, and where its replica goes."""
        from dxts.core.catalogue import CatalogueFile

        if self.elements and storage_element not in self.elements:
            raise InvalidArgument(
                f"no storage element {storage_element!r} (there are {', '.join(self.elements)})",
                field="--se",
            )
        if not local.is_file():
            raise InvalidArgument(f"no such file: {local}", field="LOCAL")
        lfn = lfn or upload_lfn(local)
        entry = CatalogueFile(
            lfn=lfn, size=local.stat().st_size, checksum=adler32(local), replicas=(storage_element,)
        )
        return entry, self.path(storage_element, lfn)

    async def get(self, catalogue: FileCatalogue, lfn: str, destination: Path) -> Path:
        """Copy a replica of `lfn` to `destination` (a directory: under the LFN's name)."""
        replicas = (await catalogue.replicas([lfn])).get(lfn, ())
        return await asyncio.to_thread(self._copy_replica, lfn, replicas, destination)

    def _copy_replica(self, lfn: str, replicas: tuple[str, ...], destination: Path) -> Path:
        for storage_element in replicas:
            source = self.path(storage_element, lfn)
            if source.is_file():
                break
        else:
            raise FailedPrecondition(
                f"no replica of {lfn} under {self.root} "
                f"(catalogue replicas: {', '.join(replicas) or 'none'})"
            )
        if destination.is_dir():
            destination = destination / source.name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
        return destination


def _copy_unless_there(local: Path, target: Path, checksum: str | None) -> None:
    """Put `local` at `target` (whole or not at all), unless the same content is there."""
    if target.is_file() and adler32(target) == checksum:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(f".{target.name}.{os.getpid()}.part")
    shutil.copyfile(local, scratch)
    scratch.replace(target)


def _storage(ctx: typer.Context) -> Storage:
    from dxts.cli.client import connection_of

    return Storage.of(connection_of(ctx))


@file_app.command("put")
def file_put(
    ctx: typer.Context,
    local: Annotated[Path, typer.Argument(metavar="LOCAL", help="The file to store.")],
    se: Annotated[str, typer.Option("--se", help="The storage element to write it to.")],
    lfn: Annotated[
        str | None,
        typer.Option(help=f"Its LFN (default: {UPLOAD_PREFIX}/<content hash>/<name>)."),
    ] = None,
) -> None:
    """Store a local file at a storage element and register it; prints its LFN."""
    from dxts.cli.client import run

    async def body(_: object) -> str:
        storage = _storage(ctx)
        async with storage.catalogue() as catalogue:
            return await storage.put(catalogue, local, se, lfn)

    typer.echo(run(ctx, body))


@file_app.command("get")
def file_get(
    ctx: typer.Context,
    lfn: Annotated[str, typer.Argument(metavar="LFN", help="A registered file.")],
    destination: Annotated[
        Path, typer.Argument(metavar="DEST", help="A file or a directory (default: here).")
    ] = Path("."),
) -> None:
    """Copy a registered file from a storage element; prints where it was written."""
    from dxts.cli.client import run

    async def body(_: object) -> Path:
        storage = _storage(ctx)
        async with storage.catalogue() as catalogue:
            return await storage.get(catalogue, lfn, destination)

    typer.echo(str(run(ctx, body)))
