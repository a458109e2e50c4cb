"""The whole CWL output object comes back in the local adaptor's outcome (and so through every
adaptor running the shared runner code): values of every type, records, Files with their
secondaryFiles and format, and Directory outputs, every File and Directory at its `lfn:` and
stored under the parcel's output prefix. A document loaded as dxts loads a submission runs as
it ran beside its files (every file it names, non-BMP text, a long past 2**53, CWL v1.0). The
tools are small copies of CWL conformance tests (`tests/cwl/fixtures/conformance/`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from test_local_adaptor import Harness, compute_payload, harness, submission

from dxts.backends.diracx import payload as worker
from dxts.backends.runner.cwl import Collected
from dxts.core.adaptor.model import OutputFile
from dxts.cwl.loading import Bundle, load_document
from dxts.v1 import common_pb2

__all__ = ["harness"]  # the fixture, used by name

CONFORMANCE = Path(__file__).parents[1] / "cwl" / "fixtures" / "conformance"


def tool(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((CONFORMANCE / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def submitted(name: str) -> dict[str, Any]:
    """The process as dxts stores it from a submission of the document `name`."""
    document, problems = load_document(Bundle.from_directory(CONFORMANCE, name))
    assert not problems and document is not None, problems
    return document.raw


async def run(harness: Harness, process: dict[str, Any], inputs: Any = None) -> tuple[Any, Any]:
    parcel = submission(inputs)
    (result,) = await harness.submit(compute_payload(process), parcel)
    outcome = await harness.outcome(result.identifier)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    return outcome, parcel.output_prefix


async def test_values_of_every_type_come_back(harness: Harness) -> None:
    outcome, _ = await run(harness, tool("values-out.cwl"))
    assert not outcome.outputs  # no file
    assert json.loads(outcome.output_object_json) == {
        "text": "café ☕ 😀",
        "count": 2**60 + 1,
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
        "anything": {"a": [1, "b"]},
        "texts": ["x", "y"],
        "pair": {"left": "l", "right": 3},
    }


async def test_files_in_records_come_back_with_their_secondary_files(harness: Harness) -> None:
    outcome, prefix = await run(harness, tool("record-out-secondaryFiles.cwl"))
    record = json.loads(outcome.output_object_json)["record_output"]
    f1, (b, c) = record["f1"], record["f2"]
    assert f1["location"] == f"lfn:{prefix}/A"
    assert "path" not in f1
    assert [s["location"] for s in f1["secondaryFiles"]] == [f"lfn:{prefix}/A.s2"]
    assert (b["basename"], c["basename"]) == ("B", "C")
    assert [s["location"] for s in c["secondaryFiles"]] == [f"lfn:{prefix}/C.s3"]
    assert f1["checksum"] == "sha1$da39a3ee5e6b4b0d3255bfef95601890afd80709"
    stored = {(o.output_name, o.lfn) for o in outcome.outputs}
    assert stored == {
        ("record_output", f"{prefix}/{name}") for name in ("A", "A.s2", "B", "B.s3", "C", "C.s3")
    }
    for output in outcome.outputs:
        assert harness.settings.se_path("LOCAL", output.lfn).is_file()


async def test_a_directory_output_is_stored_with_every_file_in_it(harness: Harness) -> None:
    outcome, prefix = await run(harness, tool("dir-out.cwl"))
    directory = json.loads(outcome.output_object_json)["outdir"]
    assert directory["class"] == "Directory"
    assert directory["location"] == f"lfn:{prefix}/{directory['basename']}"
    listing = {entry["basename"]: entry for entry in directory["listing"]}
    assert listing["hello.txt"]["checksum"] == f"sha1${hashlib.sha1(b'Hello, world!').hexdigest()}"
    assert listing["hello.txt"]["location"] == f"{directory['location']}/hello.txt"
    assert listing["sub"]["class"] == "Directory"
    stored = {o.lfn: o for o in outcome.outputs}
    inner = f"{directory['location'].removeprefix('lfn:')}/sub/goodbye.txt"
    assert set(stored) == {f"{directory['location'].removeprefix('lfn:')}/hello.txt", inner}
    assert stored[inner].size == 23
    assert harness.settings.se_path("LOCAL", inner).read_text() == "Goodbye, cruel world.\n\n"


async def test_a_file_keeps_its_format(harness: Harness) -> None:
    outcome, prefix = await run(harness, tool("format-out.cwl"), {"message": "hi"})
    output = json.loads(outcome.output_object_json)["output"]
    assert output["format"] == "http://edamontology.org/format_1929"
    assert (output["location"], output["size"]) == (f"lfn:{prefix}/output.txt", 3)


async def test_a_document_runs_as_it_did_beside_its_files(harness: Harness) -> None:
    outcome, _ = await run(harness, submitted("beside.cwl"))
    assert json.loads(outcome.output_object_json) == {
        "args": ["1152921504606846977"],  # after the script, the long as written
        "greeting": "Hello, 🌍!\n",
        "extra": "beside the document\n",
        "env": "hello test env",
    }


async def test_a_cwl_v1_0_document_runs(harness: Harness) -> None:
    outcome, prefix = await run(harness, submitted("echo-v1.0.cwl"))
    (output,) = outcome.outputs
    assert harness.settings.se_path("LOCAL", output.lfn).read_text() == "from v1.0\n"
    assert json.loads(outcome.output_object_json)["out"]["location"] == f"lfn:{prefix}/out.txt"


def test_the_diracx_payloads_result_carries_the_output_object() -> None:
    """A DiracX job runs the same runner code and sends its output object back in its result."""
    collected = Collected(
        [OutputFile("out", "/dxts/t/p/out.txt", 3, "adler32:00000001", "SE")],
        "",
        '{"out": {"class": "File", "location": "lfn:/dxts/t/p/out.txt"}, "n": 1152921504606846977}',
    )
    document = worker.result_document(collected, None, "")
    assert worker.read_result(json.dumps(document)) == (collected, None, "", None, None)


async def test_a_default_file_passed_through_comes_back(harness: Harness) -> None:
    """After the conformance test record_with_default: the default File beside the document,
    stored as a literal, is written back as a file for the runner, so the tool echoing its
    record names a file that is still there once it has run."""
    outcome, prefix = await run(harness, submitted("record-default.cwl"))
    record = json.loads(outcome.output_object_json)["same_record"]
    greeting = (CONFORMANCE / "greeting.txt").read_bytes()
    assert record["first"] == "y"
    sixth = record["sixth"]
    assert (sixth["basename"], sixth["size"]) == ("greeting.txt", len(greeting))
    assert sixth["checksum"] == f"sha1${hashlib.sha1(greeting).hexdigest()}"
    (stored,) = outcome.outputs
    assert sixth["location"] == f"lfn:{stored.lfn}" == f"lfn:{prefix}/greeting.txt"
    assert harness.settings.se_path("LOCAL", stored.lfn).read_bytes() == greeting


async def test_formats_are_checked_against_the_ontology_the_document_names(
    harness: Harness, tmp_path: Path
) -> None:
    """After the conformance test format_checking_subclass: the ontology `$schemas` names,
    carried in the stored process, is beside the process the runner reads, so an input of a
    subclass of the format asked for is accepted."""
    (tmp_path / "ref.fasta").write_text(">x\nACGT\n")
    (tmp_path / "ref.fasta").chmod(0o644)  # a file of the machine is readable by its users
    # A file of the machine, not a catalogued one: jobs see it only where the installation
    # shows it to them (`sandbox_paths`).
    await harness.stop()
    await harness.start(sandbox_paths=[tmp_path / "ref.fasta"])
    subclass = "http://edamontology.org/format_1929"
    inputs = {
        "input": {
            "class": "File",
            "location": (tmp_path / "ref.fasta").as_uri(),
            "format": subclass,
        }
    }
    outcome, prefix = await run(harness, submitted("format-ontology.cwl"), inputs)
    output = json.loads(outcome.output_object_json)["output"]
    assert (output["location"], output["format"]) == (f"lfn:{prefix}/output.txt", subclass)
