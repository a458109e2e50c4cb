"""A submission's bundle: the main document and the files it references, by relative path.

Every file is read through `Bundle.read` with the installation's `DocumentLimits`, which refuses
a file too big, too deep, too aliased or not UTF-8 before any YAML loader builds it (see
`dxts.cwl.limits`); the bundle as given is checked too (`Bundle.problems`: keys that are not
paths inside it, too many files, too many bytes). A directory bundle reads only from under its
root: a symlink out of it names no file of the bundle.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from dxts.core.config import DocumentLimits
from dxts.cwl.limits import DocumentRefused, check_size, check_text
from dxts.cwl.problems import Kind, Problem, error


class BundleEscape(ValueError):
    """A path that leaves the bundle (absolute, `..` past the root, or a URL)."""


class Bundle:
    """The main document and the files it references, addressed by relative POSIX paths."""

    def __init__(self, main: str, files: Mapping[str, str] | None = None, root: Path | None = None):
        self.main = main
        self._files: dict[str, str] = {}
        self._refused_keys: list[tuple[str, str]] = []  # (key, why): keys naming no bundle path
        for key, text in (files or {}).items():
            try:
                self._files[normalise_path("", key, uri=False)] = text
            except BundleEscape as escape:
                self._refused_keys.append((key, str(escape)))
        self._root = root.resolve() if root is not None else None
        self._read: dict[str, str] = {}
        self._nodes: dict[str, int] = {}
        self._bytes_read = 0

    @classmethod
    def from_mapping(cls, main: str, files: Mapping[str, str]) -> Bundle:
        return cls(main, files)

    @classmethod
    def from_directory(cls, root: Path, main: str) -> Bundle:
        """Files are read on demand, and only from under `root` (symlinks included)."""
        return cls(main, root=root)

    def problems(self, limits: DocumentLimits) -> list[Problem]:
        """What is wrong with the bundle as given, before any file of it is read."""
        found = [
            error(Kind.INVALID_BUNDLE, "", f"the bundle's file {key!r}: {why}")
            for key, why in self._refused_keys
        ]
        count = len(self._files) + len(self._refused_keys)
        if count > limits.max_bundle_files:
            found.append(_over_bundle("max_bundle_files", limits, f"{count} files"))
        size = sum(_bytes(text) for text in self._files.values())
        if size > limits.max_bundle_bytes:
            found.append(_over_bundle("max_bundle_bytes", limits, f"{size} bytes"))
        return found

    def read(self, path: str, limits: DocumentLimits | None = None) -> str | None:
        """The text of `path`, None if the bundle has no such file.

        Raises DocumentRefused for a file that crosses one of `limits` (default: the default
        limits), checked before the text is read whole or parsed, or that is not UTF-8, or when
        the files read so far add up to more than the bundle may hold."""
        limits = limits or DocumentLimits()
        text = self._read.get(path)
        if text is None:
            text = self._lookup(path, limits)
            if text is None:
                return None
            self._nodes[path] = check_text(path, text, limits)
            self._read[path] = text
            self._bytes_read += _bytes(text)
            self._check_totals(limits)
        return text

    def read_data(self, path: str, limits: DocumentLimits | None = None) -> str | None:
        """The text of a data file the document names (a default File, an `$include`, a
        `$schemas` ontology), None if the bundle has no such file: counted in the bundle's
        totals like a document, within `max_data_bytes`, and not read as YAML. Raises
        DocumentRefused (not UTF-8, too big)."""
        limits = limits or DocumentLimits()
        text = self._read.get(path)
        if text is None:
            text = self._lookup(path, limits, "max_data_bytes")
            if text is None:
                return None
            check_size(path, _bytes(text), limits, "max_data_bytes")
            self._read[path] = text
            self._bytes_read += _bytes(text)
            self._check_totals(limits)
        return text

    def listing(self, directory: str) -> list[str]:
        """The paths of every file under the bundle directory `directory` (nothing is read)."""
        prefix = f"{directory.rstrip('/')}/" if directory not in ("", ".") else ""
        found = {path for path in self._files if path.startswith(prefix)}
        if self._root is not None:
            base = (self._root / directory).resolve()
            if base.is_relative_to(self._root) and base.is_dir():
                for item in base.rglob("*"):
                    if item.is_file() and item.resolve().is_relative_to(self._root):
                        found.add(item.relative_to(self._root).as_posix())
        return sorted(found)

    def has(self, path: str) -> bool:
        """Whether the bundle has a file at `path` (nothing is read)."""
        if path in self._files:
            return True
        if self._root is None:
            return False
        target = (self._root / path).resolve()
        return target.is_relative_to(self._root) and target.is_file()

    def files_read(self) -> dict[str, str]:
        """Every file read so far, by path: what the submission consists of."""
        return dict(self._read)

    def nodes(self, path: str) -> int:
        """The nodes of a file read with limits, aliases expanded."""
        return self._nodes.get(path, 0)

    def _check_totals(self, limits: DocumentLimits) -> None:
        if len(self._read) > limits.max_bundle_files:
            raise DocumentRefused(
                "the bundle",
                f"reads more than {limits.max_bundle_files} files, over the limit "
                f"document_limits.max_bundle_files = {limits.max_bundle_files}",
                limit="max_bundle_files",
            )
        if self._bytes_read > limits.max_bundle_bytes:
            raise DocumentRefused(
                "the bundle",
                f"its files add up to {self._bytes_read} bytes, over the limit "
                f"document_limits.max_bundle_bytes = {limits.max_bundle_bytes}",
                limit="max_bundle_bytes",
            )

    def _lookup(
        self, path: str, limits: DocumentLimits, limit: str = "max_document_bytes"
    ) -> str | None:
        if path in self._files:
            return self._files[path]
        if not self.has(path):
            return None
        assert self._root is not None
        target = (self._root / path).resolve()
        check_size(path, target.stat().st_size, limits, limit)
        try:
            return target.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise DocumentRefused(path, "not UTF-8 text") from None
        except OSError as failure:
            raise DocumentRefused(path, f"cannot be read: {failure.strerror}") from None

    def digest(self) -> str:
        """SHA-256 (hex) of the main path and of every file read so far, by path: after loading,
        what the submission consists of (a file of the bundle nothing referenced is not part of
        it, and a directory bundle cannot be listed anyway)."""
        document = {"main": self.main, "files": dict(sorted(self._read.items()))}
        return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _bytes(text: str) -> int:
    return len(text.encode(errors="surrogatepass"))


def _over_bundle(limit: str, limits: DocumentLimits, what: str) -> Problem:
    value = getattr(limits, limit)
    return error(
        Kind.DOCUMENT_LIMIT,
        "",
        f"the bundle has {what}, over the limit document_limits.{limit} = {value}",
    )


def refusal(refused: DocumentRefused, where: str) -> Problem:
    """The problem a refused file is reported as, at `where` (the `run` naming it)."""
    kind = Kind.DOCUMENT_LIMIT if refused.limit else Kind.INVALID_CWL
    return error(kind, where, str(refused))


def normalise_path(base_file: str, reference: str, *, uri: bool = True) -> str:
    """The bundle path `reference` names, relative to the file `base_file` it appears in.

    A reference a document writes is a URI reference, so `a:b` names the scheme `a`; a path of
    the bundle itself (a file's key, the main document: `uri=False`) is a file name, in which a
    colon is only a character."""
    if (uri and urlsplit(reference).scheme) or reference.startswith("/"):
        raise BundleEscape(f"{reference!r} is not a path inside the bundle")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(base_file), reference))
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        raise BundleEscape(f"{reference!r} climbs out of the bundle")
    return joined
