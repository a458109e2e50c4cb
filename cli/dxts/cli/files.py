"""Files in and out of the installation's storage: `dxts file put`, `get` and `ls`.

No service carries file contents (the contracts move parcels, outcomes and catalogue entries,
never bytes), so these commands reach the storage the way the adaptors of `dxts up` do: the
storage elements are directories under the installation's storage root (`<root>/<SE>/<LFN>`)
and the file catalogue is the installation's. `dxts up` writes both into its connection file
(`storage`, `storage_elements`, `catalogue`); DXTS_STORAGE_ROOT, DXTS_STORAGE_ELEMENTS and
DXTS_CATALOGUE_URL name them for any other installation whose storage this machine sees.

`put` copies the file to `<root>/<SE>/<LFN>` and registers the LFN with its size, adler32
checksum and the replica; putting the same content under the same LFN again changes nothing,
other content under a registered LFN is refused. `get` copies a replica found through the
catalogue (the first at a storage element under the root whose content has the registered
checksum) to the destination; a replica whose checksum differs is an error naming the LFN and
the storage element, never silently returned. Both check the LFN first (`dxts.core.lfn`): one
name is one file, so `/./A` or `//A` is refused rather than written over `/A`.

The storage elements named in DXTS_STORAGE_ENDPOINTS (`dxts up` writes its own into the
connection file) are XRootD servers (docs/storage.md): `put` uploads there with the XRootD client
and checks the server's adler32 of the copy before registering it (a copy that differs is
deleted); `get` fetches a replica from there when no local one is at hand and checks the copy
against the registered checksum. `ls LFN` lists the file's replicas, each with its SE, where it is,
and the size and checksum the SE holds, beside the catalogue's.

All act for the caller's VO, as the definition service reads it from the verified token and
judges the LFN under the installation's namespace before anything is touched
(`DefinitionService.GetFileAccess`, `checked_vo`): `put` writes only in the VO's namespace
(`/<vo>/...`, `dxts.core.lfn.FileNamespace`; without `--lfn`, under `/<vo>/dxts/uploads/`),
`get` finds only the VO's files and the shared ones (another VO's LFN is refused, naming
whose it is). These commands then reach the storage and catalogue directly, so this is the
boundary for users who reach them only through `dxts file`; see docs/security.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated

import typer

from dxts.cli.connection import Connection
from dxts.core.errors import FailedPrecondition, InvalidArgument

if TYPE_CHECKING:
    from dxts.cli.client import Clients
    from dxts.core.catalogue import CatalogueFile, FileCatalogue
    from dxts.core.storage import StorageEndpoint

file_app = typer.Typer(no_args_is_help=True, help="Files in and out of the storage elements.")

# Where a file put without an LFN goes, in the uploader's VO's namespace: under its content
# hash, so that the same file put twice is one catalogue entry and two different files of one
# name never collide.
UPLOADS = "dxts/uploads"  # below the VO's home: /<vo>/dxts/uploads
TRANSFER_TIMEOUT_S = 900.0  # one upload or download to or from an XRootD SE


def adler32(path: Path) -> str:
    checksum = 1
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            checksum = zlib.adler32(chunk, checksum)
    return f"adler32:{checksum:08x}"


def upload_lfn(path: Path, prefix: str) -> str:
    """The LFN a file is put under when none is given: its SHA-256 (first 32 hex digits) and
    its own name, so that a runner staging it sees the name it had, under `prefix` (the
    uploader's VO's `Storage.uploads`)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return f"{prefix}/{digest.hexdigest()[:32]}/{path.name}"


@dataclass(frozen=True)
class Storage:
    """The installation's storage root, its storage elements and its catalogue URL, used for
    the caller's VO (`vo`, from its token): its files and the shared ones, nothing else."""

    root: Path
    elements: tuple[str, ...]
    catalogue_url: str
    vo: str
    endpoints: Mapping[str, StorageEndpoint] = field(default_factory=dict)

    @classmethod
    def of(cls, connection: Connection, verified_vo: str | None = None) -> Storage:
        """The storage for `verified_vo` (the VO the definition service read from the
        verified token, `checked_vo`), else for the VO the token names, read unverified."""
        if not connection.storage or not connection.catalogue:
            raise FailedPrecondition(
                "the storage root and the catalogue are unknown: start `dxts up` (its "
                "connection file names them) or set DXTS_STORAGE_ROOT and DXTS_CATALOGUE_URL"
            )
        vo = verified_vo or connection.claims().get("vo")
        if not isinstance(vo, str) or not vo:
            raise FailedPrecondition(
                "files belong to a VO: give a token naming yours (--token or DXTS_TOKEN)"
            )
        elements = tuple(e for e in (connection.storage_elements or "").split(",") if e)
        from dxts.core.storage import parse_endpoints

        try:
            endpoints = parse_endpoints(connection.storage_endpoints or "")
        except ValueError as error:
            raise InvalidArgument(f"DXTS_STORAGE_ENDPOINTS: {error}") from None
        return cls(Path(connection.storage), elements, connection.catalogue, vo, endpoints)

    @property
    def uploads(self) -> str:
        """Where files put without an LFN go: `/<vo>/dxts/uploads` by default."""
        from dxts.core.lfn import FileNamespace

        return FileNamespace().home(self.vo) + UPLOADS

    def path(self, storage_element: str, lfn: str) -> Path:
        from dxts.core.lfn import check_lfn

        return self.root / storage_element / check_lfn(lfn, field="LFN").lstrip("/")

    @contextlib.asynccontextmanager
    async def catalogue(self) -> AsyncIterator[FileCatalogue]:
        """The installation's catalogue as the caller's VO sees it, open for a few calls."""
        from dxts.core.catalogue import (
            CatalogueSettings,
            FileScope,
            ScopedCatalogue,
            open_catalogue,
        )
        from dxts.core.lfn import FileNamespace

        opened = await open_catalogue(CatalogueSettings(url=self.catalogue_url))
        try:
            yield ScopedCatalogue(opened, FileScope(self.vo, FileNamespace()))
        finally:
            await opened.close()

    async def put(
        self, catalogue: FileCatalogue, local: Path, storage_element: str, lfn: str | None = None
    ) -> str:
        """Copy `local` to the storage element and register it; returns its LFN."""
        entry, target = await asyncio.to_thread(self._entry, local, storage_element, lfn)
        self._writable(entry.lfn)
        known = (await catalogue.files([entry.lfn])).get(entry.lfn)
        if known is not None and not known.same_file(entry):
            raise FailedPrecondition(f"{entry.lfn} is registered with other content")
        if storage_element in self.endpoints:
            await _upload(local, self.endpoints[storage_element], entry)
        else:
            await asyncio.to_thread(_copy_unless_there, local, target, entry.checksum)
        await catalogue.register([entry])
        return entry.lfn

    def _writable(self, lfn: str) -> None:
        """Refuse, before any byte is written, an LFN outside the caller's VO's namespace."""
        from dxts.core.errors import PermissionDenied
        from dxts.core.lfn import FileNamespace

        problem = FileNamespace().refusal(self.vo, [lfn], write=True)
        if problem is not None:
            raise PermissionDenied(problem)

    def _entry(
        self, local: Path, storage_element: str, lfn: str | None
    ) -> tuple[CatalogueFile, Path]:
        """The catalogue entry `local` is put as, and where its replica goes."""
        from dxts.core.catalogue import CatalogueFile
        from dxts.core.lfn import check_lfn

        known = [*self.elements, *self.endpoints]
        if known and storage_element not in known:
            raise InvalidArgument(
                f"no storage element {storage_element!r} (there are {', '.join(known)})",
                field="--se",
            )
        endpoint = self.endpoints.get(storage_element)
        if endpoint is not None and endpoint.read_only:
            raise InvalidArgument(
                f"{storage_element} is read-only: nothing is put there", field="--se"
            )
        if not local.is_file():
            raise InvalidArgument(f"no such file: {local}", field="LOCAL")
        lfn = check_lfn(lfn or upload_lfn(local, self.uploads), field="--lfn")
        entry = CatalogueFile(
            lfn=lfn, size=local.stat().st_size, checksum=adler32(local), replicas=(storage_element,)
        )
        return entry, self.path(storage_element, lfn)

    async def get(self, catalogue: FileCatalogue, lfn: str, destination: Path) -> Path:
        """Copy a replica of `lfn` to `destination` (a directory: under the LFN's name),
        verified against the checksum registered with it."""
        from dxts.core.lfn import check_lfn

        check_lfn(lfn, field="LFN")
        file = (await catalogue.files([lfn])).get(lfn)
        if file is None:  # another VO's file is not there for this one
            raise FailedPrecondition(f"{lfn} is not in the catalogue (of VO {self.vo})")
        remote = [se for se in file.replicas if se in self.endpoints]
        local = [se for se in file.replicas if se not in self.endpoints]
        if remote and not any(self.path(se, file.lfn).is_file() for se in local):
            return await self._fetch(file, destination, remote)
        return await asyncio.to_thread(self._copy_replica, file, destination)

    async def _fetch(self, file: CatalogueFile, destination: Path, ses: list[str]) -> Path:
        """The first replica at an XRootD SE that can be fetched and has the registered
        checksum, copied (whole or not at all); FailedPrecondition naming each SE and what
        went wrong there (the server's words, or the checksum its copy has) otherwise."""
        from dxts.core import transfers

        target = await asyncio.to_thread(_made_room, destination, PurePosixPath(file.lfn).name)
        scratch = target.with_name(f".{target.name}.{os.getpid()}.part")
        problems = []
        for se in ses:
            copy = transfers.Copy(self.endpoints[se].url(file.lfn), str(scratch))
            (result,) = await transfers.copy_files([copy], timeout_s=TRANSFER_TIMEOUT_S)
            if not result.ok:
                problems.append(f"{se}: {result.message}")
                continue
            found = await asyncio.to_thread(adler32, scratch)
            if file.checksum is None or transfers.same_checksum(found, file.checksum):
                scratch.replace(target)
                return target
            scratch.unlink()
            problems.append(f"{se} holds {found}, registered {file.checksum}")
        raise FailedPrecondition(f"cannot get {file.lfn}: {'; '.join(problems)}")

    async def replicas(self, catalogue: FileCatalogue, lfn: str) -> list[str]:
        """`ls`: the registered size and checksum of `lfn`, then one line per replica: its
        SE, where it is, and the size and checksum that SE holds (`missing` when it holds
        none, or the server's words when it cannot be asked)."""
        from dxts.core.lfn import check_lfn

        check_lfn(lfn, field="LFN")
        file = (await catalogue.files([lfn])).get(lfn)
        if file is None:
            raise FailedPrecondition(f"{lfn} is not in the catalogue (of VO {self.vo})")
        lines = [f"{lfn}  size {file.size}  {file.checksum or 'no checksum'}"]
        for se in file.replicas:
            lines.append("  " + "  ".join(await asyncio.to_thread(self._held, se, lfn)))
        return lines

    def _held(self, se: str, lfn: str) -> list[str]:
        """An SE's replica of `lfn`: SE, location, size and checksum as the SE has them."""
        from dxts.core import transfers

        if se in self.endpoints:
            location = self.endpoints[se].url(lfn)
        elif se in self.elements:
            location = str(self.path(se, lfn))
        else:
            return [se, "(an SE this installation does not reach)"]
        try:
            size, checksum = transfers.size(location), transfers.checksum(location)
        except transfers.StorageError as error:
            return [se, location, str(error)]
        if size is None or checksum is None:
            return [se, location, "missing"]
        return [se, location, str(size), checksum]

    def _copy_replica(self, file: CatalogueFile, destination: Path) -> Path:
        """The first replica under the root whose content has the registered checksum, copied
        (whole or not at all); FailedPrecondition naming the LFN and each storage element whose
        replica does not match, when none does."""
        present = [se for se in file.replicas if self.path(se, file.lfn).is_file()]
        if not present:
            raise FailedPrecondition(
                f"no replica of {file.lfn} under {self.root} "
                f"(catalogue replicas: {', '.join(file.replicas) or 'none'})"
            )
        mismatches = []
        for storage_element in present:
            source = self.path(storage_element, file.lfn)
            target = destination / source.name if destination.is_dir() else destination
            target.parent.mkdir(parents=True, exist_ok=True)
            scratch = target.with_name(f".{target.name}.{os.getpid()}.part")
            shutil.copyfile(source, scratch)
            found = adler32(scratch)
            if file.checksum is None or found == file.checksum:
                scratch.replace(target)
                return target
            scratch.unlink()
            mismatches.append(f"{storage_element} holds {found}")
        raise FailedPrecondition(
            f"checksum mismatch for {file.lfn}: registered {file.checksum}, "
            f"but {'; '.join(mismatches)}"
        )


def _made_room(destination: Path, name: str) -> Path:
    """Where a file of `name` got to `destination` goes (a directory: under its name), its
    folder made."""
    target = destination / name if destination.is_dir() else destination
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


async def _upload(local: Path, endpoint: StorageEndpoint, entry: CatalogueFile) -> None:
    """Put `local` at the XRootD SE (whole or not at all: the server keeps it once complete),
    unless the same content is there; then the server's adler32 of it must be the entry's (a
    copy that differs is deleted). FailedPrecondition in the server's words otherwise."""
    from dxts.core import transfers

    url = endpoint.url(entry.lfn)
    where = f"{entry.lfn} at {endpoint.name}"
    try:
        there = await asyncio.to_thread(transfers.checksum, url)
        if there and entry.checksum and transfers.same_checksum(there, entry.checksum):
            return
        (result,) = await transfers.copy_files(
            [transfers.Copy(str(local), url)], timeout_s=TRANSFER_TIMEOUT_S
        )
        if not result.ok:
            raise FailedPrecondition(f"cannot put {where}: {result.message}")
        found = await asyncio.to_thread(transfers.checksum, url)
    except transfers.StorageError as error:
        raise FailedPrecondition(f"cannot put {where}: {error}") from None
    if found is None or not entry.checksum or not transfers.same_checksum(found, entry.checksum):
        with contextlib.suppress(transfers.StorageError):
            await asyncio.to_thread(transfers.remove, url)
        raise FailedPrecondition(
            f"cannot put {where}: checksum mismatch: the copy has {found}, "
            f"expected {entry.checksum}"
        )


def _copy_unless_there(local: Path, target: Path, checksum: str | None) -> None:
    """Put `local` at `target` (whole or not at all), unless the same content is there."""
    if target.is_file() and adler32(target) == checksum:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(f".{target.name}.{os.getpid()}.part")
    shutil.copyfile(local, scratch)
    scratch.replace(target)


async def checked_vo(clients: Clients, lfns: list[str], *, write: bool) -> str:
    """The caller's VO as the definition service verified it from the token, once the service
    said the VO may read (or, with `write`, change) `lfns` under the installation's namespace
    (`DefinitionService.GetFileAccess`: PERMISSION_DENIED naming the file otherwise). Asked
    before storage or the catalogue is touched, so a forged token or a client's own settings
    lift nothing the service would refuse."""
    from dxts.v1 import definition_pb2

    reply = await clients.definition.GetFileAccess(
        definition_pb2.GetFileAccessRequest(lfns=lfns, write=write)
    )
    return str(reply.vo)


def _storage(ctx: typer.Context, verified_vo: str) -> Storage:
    from dxts.cli.client import connection_of

    return Storage.of(connection_of(ctx), verified_vo)


@file_app.command("put")
def file_put(
    ctx: typer.Context,
    local: Annotated[Path, typer.Argument(metavar="LOCAL", help="The file to store.")],
    se: Annotated[str, typer.Option("--se", help="The storage element to write it to.")],
    lfn: Annotated[
        str | None,
        typer.Option(help="Its LFN (default: /<vo>/dxts/uploads/<content hash>/<name>)."),
    ] = None,
) -> None:
    """Store a local file at a storage element and register it; prints its LFN."""
    from dxts.cli.client import run

    async def body(clients: Clients) -> str:
        from dxts.core.lfn import check_lfn

        named = [check_lfn(lfn, field="--lfn")] if lfn is not None else []
        storage = _storage(ctx, await checked_vo(clients, named, write=True))
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

    async def body(clients: Clients) -> Path:
        from dxts.core.lfn import check_lfn

        storage = _storage(
            ctx, await checked_vo(clients, [check_lfn(lfn, field="LFN")], write=False)
        )
        async with storage.catalogue() as catalogue:
            return await storage.get(catalogue, lfn, destination)

    typer.echo(str(run(ctx, body)))


@file_app.command("ls")
def file_ls(
    ctx: typer.Context,
    lfn: Annotated[str, typer.Argument(metavar="LFN", help="A registered file.")],
) -> None:
    """List a registered file's replicas: SE, where, and the size and checksum each SE holds."""
    from dxts.cli.client import run

    async def body(clients: Clients) -> list[str]:
        from dxts.core.lfn import check_lfn

        storage = _storage(
            ctx, await checked_vo(clients, [check_lfn(lfn, field="LFN")], write=False)
        )
        async with storage.catalogue() as catalogue:
            return await storage.replicas(catalogue, lfn)

    typer.echo("\n".join(run(ctx, body)))
