"""A document on disk as the bundle the services take: the document and every file it reads
(`run` paths and `$import`s, followed recursively), read from under its directory.

The files are found by loading the document exactly as the definition service and `dxts
validate` do (`dxts.cwl.loading`), so the three agree on what the bundle holds and what they
refuse: a file over a limit of the installation's `document_limits` (DXTS_CONFIG_FILE, else the
defaults), a symlink or a path out of the bundle directory, a file that is not YAML. Each
problem is raised as the server would report it (InvalidArgument with the document problem),
before anything is sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dxts.core.config import load_installation_config
from dxts.core.errors import InvalidArgument
from dxts.v1 import common_pb2

if TYPE_CHECKING:
    from dxts.cwl.loading import LoadedDocument


def bundle(
    document: Path, root: Path | None = None, fragment: str = ""
) -> common_pb2.DocumentBundle:
    """The bundle of `document`, its paths relative to `root` (default: its directory); with
    `fragment`, the main process is that entry of the document's `$graph`."""
    return loaded_bundle(document, root, fragment)[0]


def loaded_bundle(
    document: Path, root: Path | None = None, fragment: str = ""
) -> tuple[common_pb2.DocumentBundle, LoadedDocument]:
    """The bundle of `document` (as `bundle`) and the document as loaded: every process it
    runs, standing alone."""
    base = (root or document.parent).resolve()
    try:
        main = document.resolve().relative_to(base).as_posix()
    except ValueError:
        raise InvalidArgument(f"{document} is not inside {base}", field="document") from None
    # Here, not at the top: the CWL tooling is a large import that only the verbs that read a
    # document need.
    from dxts.cwl.loading import Bundle, load_document
    from dxts.cwl.problems import raise_for_errors

    if not (base / main).is_file():
        raise InvalidArgument(f"no such file: {base / main}", field=main)
    limits = load_installation_config().definition.document_limits
    main_path = f"{main}#{fragment}" if fragment else main
    files = Bundle.from_directory(base, main_path)
    loaded, problems = load_document(files, limits)
    raise_for_errors(problems)
    assert loaded is not None  # a document that cannot be loaded is an error raised above
    sent = common_pb2.DocumentBundle(
        main_path=main_path,
        files={path: text.encode() for path, text in files.files_read().items()},
    )
    return sent, loaded
