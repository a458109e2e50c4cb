"""Docs that stand alone: every document the code or the docs cite is in the repository.

A comment or docstring that points at a document a reader cannot open explains nothing, so the
rule is checked mechanically. In every source file of the repository (the packages, the
scripts, the chart, the contracts, the tests) the prose a reader reads — Python comments and
docstrings, `#` and `//` comments elsewhere, JSON `description` strings — is searched for
citations of documents:

* a file name ending in `.md` or `.txt`: it must name a file of the repository (by its path
  from the root, or by its name alone when exactly that name exists somewhere in it);
* an architecture decision record (`ADR` followed by a number): the repository holds none, so
  any is a citation of a missing document — say the point in place, or point at docs/;
* a mention of the design-time notes the project was built from: likewise.

A file name the same file also writes as a string literal is the code's own data (a test's
input file), not a citation.

The docs themselves (docs/, README.md, BENCHMARKS.md) are held to the same rule over their whole
text, and their relative links must name files of the repository.
Test data is not prose: string literals in code and the CWL conformance inputs are not read.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The directories whose files are source; top-level build files are read too.
SOURCE_DIRS = (
    "core",
    "cwl",
    "services",
    "dispatcher",
    "backends",
    "cli",
    "bench",
    "web",
    "scripts",
    "helm",
    "protos",
    "tests",
    ".ci",
    "examples",
)
TOP_LEVEL = ("Dockerfile", "pyproject.toml", "setup.py", "buf.yaml")
# Not this project's prose: the CWL conformance suite's inputs, copied from upstream, and the
# specification's `dirac:` hint schema, copied into the package as the specification wrote it.
NOT_PROSE = ("tests/cwl_conformance/", "cwl/dxts/cwl/data/dirac-hints-1.0.json")
BINARY_SUFFIXES = {".png", ".jpg", ".gz", ".tar", ".whl", ".ico", ".pdf"}
DOCS = ("README.md", "BENCHMARKS.md", "docs")

DOCUMENT = re.compile(r"(?<![\w./-])((?:\.{1,2}/)*[\w][\w./-]*\.(?:md|txt))\b")
ADR = re.compile(r"\b(?:[A-Z]+-)?ADR[- ]?\d+", re.IGNORECASE)
DESIGN_NOTE = re.compile(r"\bdesign[- ]notes?\b", re.IGNORECASE)
# What any citation above contains: a cheap test before a file is parsed.
CANDIDATE = re.compile(r"\.(?:md|txt)\b|ADR|design", re.IGNORECASE)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def tracked_files() -> list[str]:
    """The repository's files: committed, staged, or new and not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    return [path for path in listed.split("\0") if path and (REPO / path).is_file()]


def source_files(files: list[str]) -> list[str]:
    return [
        path
        for path in files
        if (path.split("/", 1)[0] in SOURCE_DIRS or path in TOP_LEVEL)
        and not path.startswith(NOT_PROSE)
        and Path(path).suffix not in BINARY_SUFFIXES | {".md"}
    ]


def python_prose(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python module."""
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None and node.body:
                yield node.body[0].lineno, docstring


def json_prose(text: str) -> Iterator[tuple[int, str]]:
    def walk(value: object) -> Iterator[str]:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "description" and isinstance(item, str):
                    yield item
                else:
                    yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    for description in walk(json.loads(text)):
        yield 0, description


def comment_prose(text: str) -> Iterator[tuple[int, str]]:
    """Comment text of a file commented with `#` or `//` (shell, YAML, TOML, proto, Dockerfile)."""
    for number, line in enumerate(text.splitlines(), start=1):
        for marker in ("#", "//"):
            at = line.find(marker)
            if at >= 0 and (at == 0 or line[at - 1].isspace()):
                yield number, line[at + len(marker) :]
                break


def prose(path: str, text: str) -> Iterator[tuple[int, str]]:
    if path.endswith((".py", ".pyi")) or text.startswith("#!/usr/bin/env python"):
        yield from python_prose(text)
    elif path.endswith(".json"):
        yield from json_prose(text)
    else:
        yield from comment_prose(text)


def resolves(name: str, citing: str, files: set[str], names: set[str]) -> bool:
    """Whether a cited file name is a file of the repository: a path from the root or from the
    citing file's directory, or a bare name that some file of the repository has."""
    if name in files or name.lstrip("./") in files:
        return True
    relative = (REPO / citing).parent / name
    try:
        if relative.resolve().relative_to(REPO).as_posix() in files:
            return True
    except ValueError:
        return False  # outside the repository
    return "/" not in name and name in names


def citations(path: str, text: str, files: set[str], names: set[str]) -> list[str]:
    """Every citation of a missing document in one file's prose, as `path:line: what`."""
    found: list[str] = []
    if not CANDIDATE.search(text):
        return found  # nothing that could be a citation: no need to parse the file
    for line, words in prose(path, text):
        for name in DOCUMENT.findall(words):
            if f'"{name}"' in text or f"'{name}'" in text:
                continue  # a file the code itself names: test data, not a document
            if not resolves(name, path, files, names):
                found.append(f"{path}:{line}: cites {name}, not in the repository")
        for match in ADR.findall(words) + DESIGN_NOTE.findall(words):
            found.append(f"{path}:{line}: cites {match!r}, not in the repository")
    return found


def broken_links(path: str, text: str, files: set[str]) -> list[str]:
    """Every relative Markdown link of a doc page that names no file of the repository."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for target in MARKDOWN_LINK.findall(line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            file = ((REPO / path).parent / target.split("#", 1)[0]).resolve()
            try:
                relative = file.relative_to(REPO).as_posix()
            except ValueError:
                relative = None
            if relative is None or not (
                relative in files or any(tracked.startswith(relative + "/") for tracked in files)
            ):
                found.append(f"{path}:{number}: links {target}, not in the repository")
    return found


FILES = tracked_files()
FILE_SET = set(FILES)
NAMES = {Path(path).name for path in FILES}


def test_source_cites_only_documents_the_repository_has() -> None:
    found = []
    for path in source_files(FILES):
        try:
            text = (REPO / path).read_text()
        except UnicodeDecodeError:
            continue
        found += citations(path, text, FILE_SET, NAMES)
    assert not found, "\n".join(found)


DOC_PAGES = [path for path in FILES if path.endswith(".md") and path.startswith(DOCS)]


def page_citations(path: str, text: str, files: set[str], names: set[str]) -> list[str]:
    """Every citation of a missing document anywhere in a doc page's text."""
    found = [
        f"{path}: cites {name}, not in the repository"
        for name in DOCUMENT.findall(text)
        if not resolves(name, path, files, names)
    ]
    return found + [
        f"{path}: cites {match!r}" for match in ADR.findall(text) + DESIGN_NOTE.findall(text)
    ]


def test_docs_cite_only_documents_the_repository_has() -> None:
    assert "docs/architecture.md" in DOC_PAGES
    found = []
    for path in DOC_PAGES:
        found += page_citations(path, (REPO / path).read_text(), FILE_SET, NAMES)
    assert not found, "\n".join(found)


def test_docs_link_only_to_files_the_repository_has() -> None:
    found = []
    for path in DOC_PAGES:
        found += broken_links(path, (REPO / path).read_text(), FILE_SET)
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("core/x.py", '"""Counted as ' + "COUNT" + 'ERS.md says."""\n'),
        ("core/x.py", "x = 1  # see " + "DX-A" + "DR-006, Hooks\n"),
        ("core/x.py", "def f():\n    '''As the " + "design" + " notes put it.'''\n"),
        ("helm/x.yaml", "a: 1  # walk-through in docs/" + "missing.md\n"),
        ("protos/x.proto", "// the rules (" + "DISPATCH" + ".md)\n"),
        ("cwl/x.json", json.dumps({"description": "see " + "ADR" + "-7"})),
    ],
)
def test_a_citation_of_a_missing_document_is_caught(path: str, text: str) -> None:
    assert citations(path, text, FILE_SET, NAMES)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("core/x.py", '"""The map is docs/architecture.md; the page is architecture.md."""\n'),
        ("core/x.py", 'NAME = "DX-ADR-004.txt"  # a string literal is data, not prose\n'),
        ("helm/x.yaml", "a: 1  # see docs/deploy.md\n"),
    ],
)
def test_a_citation_of_a_document_the_repository_has_passes(path: str, text: str) -> None:
    assert not citations(path, text, FILE_SET, NAMES)


def test_a_broken_doc_link_is_caught() -> None:
    page = "See [the guide](adaptors.md) and [the lost one](" + "nowhere" + ".md).\n"
    assert broken_links("docs/x.md", page, FILE_SET) == [
        "docs/x.md:1: links nowhere.md, not in the repository"
    ]


def test_a_doc_page_citing_a_missing_document_is_caught() -> None:
    page = (
        "As [the map](architecture.md) and " + "STATE-" + "MACHINES.md say (" + "DX-A" + "DR-5).\n"
    )
    assert len(page_citations("docs/x.md", page, FILE_SET, NAMES)) == 2
