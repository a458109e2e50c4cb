"""The document limits: every hostile file refused before it is built, naming the limit and the
file; the deadline and abandonment checkpoints of loading."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
from cwl_support import catalogue, example
from hostile import BY_LIMIT, HEADER, billion_laughs, many_nodes

from dxts.core.config import DefinitionConfig, DocumentLimits
from dxts.core.deadlines import checkpoint, deadline, in_abandonable_thread
from dxts.core.errors import DeadlineExceeded
from dxts.cwl.check import check_document
from dxts.cwl.limits import check_text
from dxts.cwl.loading import Bundle
from dxts.cwl.problems import Problem, Severity


def resident_bytes() -> int:
    """This process's resident set size now (not its peak)."""
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def errors(bundle: Bundle, limits: DocumentLimits | None = None) -> list[Problem]:
    config = DefinitionConfig(document_limits=limits or DocumentLimits())
    problems, _ = check_document(bundle, catalogue=catalogue(), config=config)
    return [p for p in problems if p.severity is Severity.ERROR]


@pytest.mark.parametrize("limit", sorted(BY_LIMIT))
def test_each_limit_is_refused_naming_it_and_the_file(limit: str) -> None:
    (refused,) = errors(Bundle.from_mapping("wf/main.cwl", {"wf/main.cwl": BY_LIMIT[limit]}))
    assert refused.kind.value == "document-limit"
    assert refused.message.startswith("wf/main.cwl: ")
    assert f"document_limits.{limit} = {getattr(DocumentLimits(), limit)}" in refused.message


def test_the_node_count_is_refused_without_any_alias() -> None:
    (refused,) = errors(Bundle.from_mapping("main.cwl", {"main.cwl": many_nodes()}))
    assert "document_limits.max_nodes" in refused.message


def test_a_billion_laughs_is_refused_at_once_with_nothing_allocated() -> None:
    bundle = Bundle.from_mapping("main.cwl", {"main.cwl": billion_laughs()})
    errors(Bundle.from_mapping("main.cwl", {"main.cwl": billion_laughs(2)}))  # imports warmed
    before = resident_bytes()
    started = time.perf_counter()
    (refused,) = errors(bundle)
    elapsed = time.perf_counter() - started
    grown = resident_bytes() - before
    assert "document_limits.max_nodes" in refused.message
    assert grown < 4 << 20, f"the refusal grew the process by {grown} bytes"
    assert elapsed < 1.0, elapsed


@pytest.mark.parametrize("cycle", ["x: &a [*a]\n", "x: &a [1, &a [*a]]\n"])
def test_an_alias_inside_the_node_it_names_is_refused(cycle: str) -> None:
    (refused,) = errors(Bundle.from_mapping("main.cwl", {"main.cwl": HEADER + cycle}))
    assert refused.kind.value == "invalid-cwl"
    assert "*a names a node that contains it" in refused.message


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        ("x: &a [1, 2]\ny: *a\nz: *a", 13),  # each alias counts the three nodes it names
        ("a: &a {b: &b [1,2,3]}\nc: [*a, *b]", 20),
        ("x: &a [&a 1, *a]", 5),  # *a names the scalar defined last, not the open sequence
    ],
)
def test_nodes_are_counted_as_expanded(text: str, nodes: int) -> None:
    assert check_text("t.yaml", text, DocumentLimits()) == nodes


def test_limits_come_from_the_configuration() -> None:
    assert all(e.kind.value != "document-limit" for e in errors(example("simulation")))
    (refused,) = errors(example("simulation"), DocumentLimits(max_depth=3))
    assert "simulation.cwl: nested deeper than the limit document_limits.max_depth = 3" in (
        refused.message
    )
    refused_files = errors(example("simulation"), DocumentLimits(max_bundle_files=2))
    assert refused_files  # the third file read, at each `run` naming one
    assert all("document_limits.max_bundle_files" in e.message for e in refused_files)


def test_a_legal_document_at_the_depth_limit_loads_without_recursion_trouble() -> None:
    limits = DocumentLimits()
    value = "1"
    for _ in range(limits.max_depth - 4):  # root, hints, the hint, args: four levels
        value = f"[{value}]"
    text = (example("simulation").read("simulation.cwl") or "").replace(
        "hints:\n", f"hints:\n  dirac:Deep:\n    args: {value}\n", 1
    )
    bundle = Bundle.from_mapping("simulation.cwl", {"simulation.cwl": text})
    assert all(e.kind.value != "document-limit" for e in errors(bundle))


def test_the_bundle_limits_count_every_file() -> None:
    files = {f"f{i}.cwl": "a: 1\n" for i in range(10)} | {"main.cwl": HEADER}
    (refused,) = errors(Bundle.from_mapping("main.cwl", files), DocumentLimits(max_bundle_files=5))
    assert "the bundle has 11 files" in refused.message
    assert "document_limits.max_bundle_files = 5" in refused.message
    (refused,) = errors(Bundle.from_mapping("main.cwl", files), DocumentLimits(max_bundle_bytes=40))
    assert "document_limits.max_bundle_bytes = 40" in refused.message


def test_an_import_used_many_times_counts_each_time() -> None:
    imported = "class: Foo\ndata: [" + ",".join(["1"] * 1000) + "]\n"
    main = HEADER + "hints:\n" + "".join("  - {$import: big.yaml}\n" for _ in range(50))
    bundle = Bundle.from_mapping("main.cwl", {"main.cwl": main, "big.yaml": imported})
    found = errors(bundle, DocumentLimits(max_bundle_nodes=20_000))
    assert any("document_limits.max_bundle_nodes = 20000" in e.message for e in found), found


def test_a_bundle_key_out_of_the_bundle_is_refused_naming_it() -> None:
    (refused,) = errors(Bundle.from_mapping("main.cwl", {"main.cwl": HEADER, "../x.cwl": "a"}))
    assert refused.kind.value == "invalid-bundle"
    assert "'../x.cwl'" in refused.message


def test_a_directory_bundle_refuses_symlinks_out_binary_and_oversized_files(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside.cwl"
    outside.write_text("cwlVersion: v1.2\nclass: CommandLineTool\ninputs: {}\noutputs: {}\n")
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "link.cwl").symlink_to(outside)
    (root / "binary.cwl").write_bytes(b"\xff\xfe\x00garbage")
    (root / "big.cwl").write_text("x" * 5000)
    limits = DocumentLimits(max_document_bytes=4000)
    (linked,) = errors(Bundle.from_directory(root, "link.cwl"), limits)
    assert "link.cwl is not in the submitted bundle" in linked.message
    (binary,) = errors(Bundle.from_directory(root, "binary.cwl"), limits)
    assert binary.message == "binary.cwl: not UTF-8 text"
    (big,) = errors(Bundle.from_directory(root, "big.cwl"), limits)
    assert "big.cwl: 5000 bytes, more than the limit document_limits.max_document_bytes" in (
        big.message
    )


def test_loading_stops_once_the_deadline_has_passed() -> None:
    with deadline(0.0), pytest.raises(DeadlineExceeded, match="deadline passed before"):
        check_document(example("simulation"), catalogue=catalogue())


async def test_abandoned_work_stops_at_its_next_checkpoint() -> None:
    started, stopped = threading.Event(), threading.Event()

    def busy() -> None:
        started.set()
        try:
            while True:
                checkpoint("spinning")
                time.sleep(0.001)
        finally:
            stopped.set()

    task = asyncio.create_task(in_abandonable_thread(busy))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(stopped.wait, 5)
