"""A document keeps its meaning away from its directory: the bundle carries every file it names
(`$include`, `$import`, a default File's or an InitialWorkDir Directory's `location`), the stored
process holds them, a CWL v1.0 document is upgraded to v1.2 (the bundle keeping the original),
and a `long` past 2**53 is hashed exactly."""

from __future__ import annotations

import json
from pathlib import Path

from dxts.cli.documents import bundle as cli_bundle
from dxts.core.config import DocumentLimits
from dxts.core.ids import canonical_json, content_hash
from dxts.cwl.loading import SCHEMAS_FIELD, Bundle, load_document

CONFORMANCE = Path(__file__).parent / "fixtures" / "conformance"


def loaded(main: str) -> dict:
    document, problems = load_document(Bundle.from_directory(CONFORMANCE, main))
    assert not problems, problems
    assert document is not None
    return document.raw


def test_the_bundle_carries_every_file_the_document_names() -> None:
    sent = cli_bundle(CONFORMANCE / "beside.cwl")
    assert sorted(sent.files) == [
        "args.py",
        "beside.cwl",
        "data/extra.txt",
        "envvar.yml",
        "greeting.txt",
    ]
    assert sent.files["greeting.txt"].decode() == "Hello, 🌍!\n"


def test_the_stored_process_holds_what_its_files_said() -> None:
    raw = loaded("beside.cwl")
    (greeting, data) = raw["requirements"]["InitialWorkDirRequirement"]["listing"]
    assert greeting["entry"] == "Hello, 🌍!\n"
    assert data == {
        "class": "Directory",
        "basename": "data",
        "listing": [
            {"class": "File", "basename": "extra.txt", "contents": "beside the document\n"}
        ],
    }
    assert raw["hints"] == [
        {
            "class": "EnvVarRequirement",
            "envDef": [{"envName": "TEST_ENV", "envValue": "hello test env"}],
        }
    ]
    script = raw["inputs"]["script"]["default"]
    assert (script["basename"], "location" in script) == ("args.py", False)
    assert script["contents"] == (CONFORMANCE / "args.py").read_text()


def test_a_name_the_bundle_lacks_is_left_as_written() -> None:
    files = {
        "tool.cwl": json.dumps(
            {
                "cwlVersion": "v1.2",
                "class": "CommandLineTool",
                "inputs": {"f": {"type": "File", "default": {"class": "File", "location": "x"}}},
                "outputs": {},
                "baseCommand": "true",
            }
        )
    }
    document, problems = load_document(Bundle.from_mapping("tool.cwl", files))
    assert not problems and document is not None
    assert document.raw["inputs"]["f"]["default"] == {"class": "File", "location": "x"}


def test_a_cwl_v1_0_tool_is_upgraded_and_the_original_kept() -> None:
    raw = loaded("echo-v1.0.cwl")
    assert raw["cwlVersion"] == "v1.2"
    # The upgrader makes v1.0's defaults explicit, as a v1.0 runner would have run it.
    assert raw["requirements"]["NetworkAccess"] == {"networkAccess": True}
    sent = cli_bundle(CONFORMANCE / "echo-v1.0.cwl")
    assert "cwlVersion: v1.0" in sent.files["echo-v1.0.cwl"].decode()


def test_a_long_past_2_to_the_53_is_kept_and_hashed_exactly() -> None:
    raw = loaded("beside.cwl")
    assert raw["inputs"]["big"]["default"] == 2**60 + 1
    assert b'"default":1152921504606846977' in canonical_json(raw)
    nearby = json.loads(json.dumps(raw))
    nearby["inputs"]["big"]["default"] = 2**60
    assert content_hash(nearby) != content_hash(raw)


def test_yaml_scalars_are_stored_as_json_types_and_big_integers_hash() -> None:
    """After the conformance test paramref_arguments_inputs: a YAML float or quoted string
    (ruamel's own scalar types) beside a long past 2**53 still hashes, and exactly."""
    text = (
        "cwlVersion: v1.2\nclass: CommandLineTool\nbaseCommand: 'true'\noutputs: {}\n"
        "inputs:\n  big: {type: long, default: 1000000000000000000000000000000000000000000}\n"
        "  ratio: {type: float, default: 1.5}\n  flag: {type: boolean, default: true}\n"
    )
    document, problems = load_document(Bundle.from_mapping("tool.cwl", {"tool.cwl": text}))
    assert not problems and document is not None
    inputs = document.raw["inputs"]
    assert [type(inputs[k]["default"]) for k in ("big", "ratio", "flag")] == [int, float, bool]
    assert type(document.raw["baseCommand"]) is str
    assert b'"default":1000000000000000000000000000000000000000000' in canonical_json(document.raw)


def test_a_colon_in_a_file_name_is_part_of_the_name(tmp_path: Path) -> None:
    """After the conformance test colon_in_paths: a bundle path is a file name, and a location
    written with an escaped colon names a bundle file; an unescaped one is a URI scheme."""
    (tmp_path / "A:Gln2Cys").write_text("from a named file\n")
    tool = {
        "cwlVersion": "v1.2",
        "class": "CommandLineTool",
        "inputs": {
            "escaped": {"type": "File", "default": {"class": "File", "location": "A%3AGln2Cys"}},
            "scheme": {"type": "File", "default": {"class": "File", "location": "A:Gln2Cys"}},
        },
        "outputs": {},
        "baseCommand": "true",
    }
    (tmp_path / "colon:tool.cwl").write_text(json.dumps(tool))
    sent = cli_bundle(tmp_path / "colon:tool.cwl")
    assert sent.main_path == "colon:tool.cwl"
    assert sorted(sent.files) == ["A:Gln2Cys", "colon:tool.cwl"]
    document, problems = load_document(Bundle.from_directory(tmp_path, "colon:tool.cwl"))
    assert not problems and document is not None
    assert document.raw["inputs"]["escaped"]["default"] == {
        "class": "File",
        "basename": "A:Gln2Cys",
        "contents": "from a named file\n",
    }
    assert document.raw["inputs"]["scheme"]["default"] == {"class": "File", "location": "A:Gln2Cys"}


def test_the_ontologies_schemas_names_are_carried_with_the_document() -> None:
    """After the conformance tests format_checking_subclass and _equivalentclass: the bundle
    carries each `$schemas` ontology and the stored process holds its text, by the name as
    written; one the bundle lacks is left to the runner."""
    sent = cli_bundle(CONFORMANCE / "format-ontology.cwl")
    assert sorted(sent.files) == ["format-ontology.cwl", "formats.ttl"]
    raw = loaded("format-ontology.cwl")
    assert raw["$schemas"] == ["formats.ttl"]
    assert raw[SCHEMAS_FIELD] == {"formats.ttl": (CONFORMANCE / "formats.ttl").read_text()}
    text = (CONFORMANCE / "format-ontology.cwl").read_text()
    files = {"tool.cwl": text.replace("- formats.ttl", "- absent.owl")}
    document, problems = load_document(Bundle.from_mapping("tool.cwl", files))
    assert not problems and document is not None
    assert document.raw["$schemas"] == ["absent.owl"] and SCHEMAS_FIELD not in document.raw


def test_a_data_file_may_be_bigger_than_a_document_up_to_its_own_limit() -> None:
    """An ontology is data no YAML loader reads (EDAM's is 2.6 MB): within `max_data_bytes`,
    not `max_document_bytes`; past it, refused."""
    tool = (CONFORMANCE / "format-ontology.cwl").read_text()
    ontology = (CONFORMANCE / "formats.ttl").read_text()
    files = {"tool.cwl": tool, "formats.ttl": ontology}
    size = len(ontology.encode())
    within = DocumentLimits(max_document_bytes=len(tool.encode()), max_data_bytes=size)
    document, problems = load_document(Bundle.from_mapping("tool.cwl", files), within)
    assert not problems and document is not None
    over = DocumentLimits(max_data_bytes=size - 1)
    _, problems = load_document(Bundle.from_mapping("tool.cwl", files), over)
    assert [p.message for p in problems] == [
        f"formats.ttl: {size} bytes, more than the limit document_limits.max_data_bytes = "
        f"{size - 1}"
    ]
