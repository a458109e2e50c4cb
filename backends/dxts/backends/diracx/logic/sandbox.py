"""DiracX sandboxes as dxts uses them: tar.bz2 archives of a few named files, identified by
their SHA-256 (DiracX's sandbox store is content-addressed, so identical archives are uploaded
once: every member is written with a fixed mtime, owner and mode, so the same files make the
same bytes)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Mapping

FORMAT = "tar.bz2"
CHECKSUM_ALGORITHM = "sha256"
MAX_MEMBER_BYTES = 64 * 2**20  # what the adaptor reads back from an output sandbox, per file


def pack(files: Mapping[str, bytes]) -> bytes:
    """The archive of `files` (name → content), deterministic."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:bz2") as archive:
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def unpack(archive_bytes: bytes) -> dict[str, bytes]:
    """The regular files of an archive (name → content), any compression tarfile reads; files
    larger than MAX_MEMBER_BYTES are left out."""
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(archive_bytes), mode="r:*") as archive:
        for member in archive.getmembers():
            if not member.isfile() or member.size > MAX_MEMBER_BYTES:
                continue
            extracted = archive.extractfile(member)
            if extracted is not None:
                files[member.name.removeprefix("./")] = extracted.read()
    return files


def checksum(archive_bytes: bytes) -> str:
    return hashlib.sha256(archive_bytes).hexdigest()
