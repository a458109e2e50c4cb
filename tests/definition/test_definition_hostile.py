"""Hostile submissions over gRPC: every document limit refused (INVALID_ARGUMENT naming it and
the file) before anything is built, the alias bomb without the server growing, bundle keys out
of the bundle, the caller's deadline, and no input whatever that reaches INTERNAL."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from typing import Any

import grpc
import pytest
import yaml
from cwl_support import EXAMPLES
from definition_world import Stub
from hostile import BY_LIMIT, LIMITS, billion_laughs
from hostile import nested as nested_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dxts.core.errors import FailedPrecondition, InvalidArgument
from dxts.v1 import common_pb2, definition_pb2

pb = definition_pb2
SIMULATION = (EXAMPLES / "simulation.cwl").read_text()
TOOLS = {
    f"transformations/{tool.name}": tool.read_text()
    for tool in (EXAMPLES / "transformations").iterdir()
}


def resident_bytes() -> int:
    """The serving process's resident set size now (the server runs in this process)."""
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def bundle(main: str, files: dict[str, str | bytes]) -> common_pb2.DocumentBundle:
    return common_pb2.DocumentBundle(
        main_path=main,
        files={k: v.encode() if isinstance(v, str) else v for k, v in files.items()},
    )


async def refusal(stub: Stub, files: dict[str, str | bytes], main: str = "main.cwl") -> str:
    """The one description of the InvalidArgument a dry-run submission of `files` gets."""
    with pytest.raises(InvalidArgument) as refused:
        await stub.SubmitWorkgraph(pb.SubmitWorkgraphRequest(bundle=bundle(main, files)))
    (violation,) = refused.value.violations
    return violation.description


@pytest.mark.parametrize("limit", sorted(BY_LIMIT))
async def test_each_limit_is_refused_naming_it_and_the_file(
    stubs: dict[str, Stub], limit: str
) -> None:
    description = await refusal(stubs["owner"], {"wf/main.cwl": BY_LIMIT[limit]}, "wf/main.cwl")
    assert description.startswith("document-limit: wf/main.cwl: ")
    assert f"document_limits.{limit} = {getattr(LIMITS, limit)}" in description


async def test_the_alias_bomb_is_refused_at_once_and_the_server_does_not_grow(
    stubs: dict[str, Stub],
) -> None:
    await refusal(stubs["owner"], {"main.cwl": billion_laughs(2)})  # warm every code path
    before = resident_bytes()
    started = time.perf_counter()
    description = await refusal(stubs["owner"], {"main.cwl": billion_laughs()})
    elapsed = time.perf_counter() - started
    grown = resident_bytes() - before
    assert "document_limits.max_nodes" in description
    assert grown < 4 << 20, f"the server grew by {grown} bytes"
    assert elapsed < 1.0, elapsed


async def test_a_user_job_is_held_to_the_same_limits(stubs: dict[str, Stub]) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await stubs["owner"].SubmitJob(
            pb.SubmitJobRequest(bundle=bundle("job.cwl", {"job.cwl": billion_laughs()}))
        )
    assert "document_limits.max_nodes" in str(refused.value)


async def test_json_nested_too_deeply_is_refused_naming_the_field(stubs: dict[str, Stub]) -> None:
    job = "cwlVersion: v1.2\nclass: CommandLineTool\ninputs: {}\noutputs: {}\n"
    with pytest.raises(InvalidArgument) as refused:
        await stubs["owner"].SubmitJob(
            pb.SubmitJobRequest(
                bundle=bundle("job.cwl", {"job.cwl": job}), inputs_json=nested_json(100_000)
            )
        )
    (violation,) = refused.value.violations
    assert (violation.field, violation.description) == (
        "inputs_json",
        "JSON nested too deeply to be read",
    )


async def test_a_bundle_key_out_of_the_bundle_is_refused_naming_it(stubs: dict[str, Stub]) -> None:
    files: dict[str, str | bytes] = {"simulation.cwl": SIMULATION, **TOOLS, "../x.cwl": "a: 1"}
    description = await refusal(stubs["owner"], files, "simulation.cwl")
    assert description.startswith("invalid-bundle: ")
    assert "'../x.cwl'" in description


async def test_work_stops_when_the_callers_deadline_passes(stubs: dict[str, Stub]) -> None:
    """A legal document too big to check in 50 ms: the caller gets DEADLINE_EXCEEDED and the
    server's thread stops at its next checkpoint instead of finishing the work."""
    big = SIMULATION + "".join(f"x{i}: [{','.join(['1'] * 400)}]\n" for i in range(400))
    files = {"simulation.cwl": big, **TOOLS}
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs["owner"].SubmitWorkgraph(
            pb.SubmitWorkgraphRequest(bundle=bundle("simulation.cwl", files), dry_run=True),
            timeout=0.05,
        )
    assert refused.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    for _ in range(200):
        if not any(t.name.startswith("dxts-validate_bundle") for t in threading.enumerate()):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the abandoned validation is still running")


# -- no input reaches INTERNAL ---------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


def _mutated(choices: list[int], value: Any) -> str:
    """The simulation example with one node replaced by `value`: `choices` pick the way down
    (an index into each container's keys), so hints, inputs, steps and runs all get wrong
    types, missing pieces and garbage."""
    document = yaml.safe_load(SIMULATION)
    node: Any = document
    for choice in choices:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = keys[choice % len(keys)]
        if not isinstance(node[key], dict | list) or choice % 7 == 0:
            node[key] = value
            break
        node = node[key]
    return json.dumps(document)


contents = st.one_of(
    st.binary(max_size=200),  # garbage, mostly not UTF-8
    st.text(max_size=200),  # random text, random YAML
    json_values.map(lambda value: yaml.safe_dump(value)),
    st.sampled_from(list(BY_LIMIT.values())),
    st.integers(1, 300).map(lambda n: "[" * n + "]" * n),
    st.builds(lambda n: "x: " + "y" * n, st.integers(0, LIMITS.max_document_bytes + 10)),
    st.just(SIMULATION),
)
paths = st.one_of(
    st.sampled_from(["main.cwl", *TOOLS, "../x.cwl", "/etc/passwd", "a/../b", "a//b", "."]),
    st.text(min_size=1, max_size=12),
)


@st.composite
def submissions(draw: st.DrawFn) -> common_pb2.DocumentBundle:
    """Mostly the example with one part broken (and its tools, sometimes broken too), else a
    bundle of random files whose main path is usually one of them."""
    if draw(st.booleans()):
        files: dict[str, str | bytes] = dict(TOOLS)
        files["simulation.cwl"] = draw(
            st.builds(_mutated, st.lists(st.integers(0, 50), max_size=8), json_values)
        )
        files.update(draw(st.dictionaries(st.sampled_from(sorted(TOOLS)), contents, max_size=1)))
        return bundle("simulation.cwl", files)
    files = draw(st.dictionaries(paths, contents, min_size=1, max_size=4))
    main = draw(st.one_of(st.sampled_from(sorted(files)), paths))
    if draw(st.booleans()):
        files = {**TOOLS, **files}
    return bundle(main, files)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    submitted=submissions(),
    dry_run=st.booleans(),
    job_inputs=st.none() | st.text(max_size=30) | json_values.map(json.dumps),
)
async def test_no_submission_reaches_internal(
    stubs: dict[str, Stub],
    submitted: common_pb2.DocumentBundle,
    dry_run: bool,
    job_inputs: str | None,
) -> None:
    """Success, INVALID_ARGUMENT or FAILED_PRECONDITION: any other status (INTERNAL above all)
    is raised by the stub as AioRpcError and fails the test. With `job_inputs` the bundle is
    submitted as a user job instead."""
    try:
        if job_inputs is None:
            await stubs["owner"].SubmitWorkgraph(
                pb.SubmitWorkgraphRequest(bundle=submitted, dry_run=dry_run)
            )
        else:
            await stubs["owner"].SubmitJob(
                pb.SubmitJobRequest(bundle=submitted, inputs_json=job_inputs)
            )
    except (InvalidArgument, FailedPrecondition) as refused:
        assert "Traceback" not in str(refused)
