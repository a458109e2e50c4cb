"""The verbs that reach execution through the command: halts, cancellations, flushes, input
operations (a Failed input decided by hand), user jobs, provenance, and `watch`'s ending
statuses (the services run without their sweeps here, so nothing moves unless a command moves
it)."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from cli_support import EXAMPLES, Dxts

from dxts.cli.operate import IN_MOTION
from dxts.core.counters import journal_inputs
from dxts.core.db import Database, Isolation, db_now
from dxts.core.ids import id_from_str, id_to_str, input_hash, new_id
from dxts.core.schema import execution
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer as Definition


async def submitted(dxts: Dxts, *, start: bool = True) -> tuple[str, dict[str, str]]:
    """A new workgraph (started), and its members' transformation ids by step."""
    result = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"))
    assert result.exit_code == 0, result.output
    workgraph = result.stdout.strip()
    if start:
        assert (await dxts("start", workgraph)).exit_code == 0
    shown = json.loads((await dxts("show", workgraph, "-o", "json")).stdout)
    return workgraph, {
        m["transformation"]["step"]: m["transformation"]["transformation_id"]
        for m in shown["members"]
    }


async def test_halt_and_cancel(dxts: Dxts) -> None:
    workgraph, _ = await submitted(dxts)
    handle = json.loads((await dxts("show", workgraph, "-o", "json")).stdout)["workgraph"]["handle"]
    halted = await dxts("halt", workgraph, "--reason", "bad conditions")
    assert (halted.exit_code, halted.stdout) == (
        0,
        f"{handle} Active (halted): {IN_MOTION[Definition.HaltWorkgraph]}\n",
    )

    other, _ = await submitted(dxts)
    cancelled = await dxts("cancel", other, "-o", "json")
    assert cancelled.exit_code == 0, cancelled.output
    assert json.loads(cancelled.stdout)["workgraph"]["status"] == "Cancelling"
    again = await dxts("start", other)
    assert again.exit_code == 1 and "Cancelling" in again.stderr
    assert len(again.stderr.splitlines()) == 1


async def test_flush_and_input_operations(dxts: Dxts) -> None:
    _, members = await submitted(dxts)
    merge = members["Merge"]
    flushed = await dxts("flush", merge)  # the packer runs during the call: nothing to pack
    assert (flushed.exit_code, flushed.stdout) == (
        0,
        f"{merge} flushed: 0 parcels made of 0 inputs (0 offered)\n",
    )
    as_json = await dxts("flush", merge, "-o", "json")
    assert json.loads(as_json.stdout) == {
        "transformation_id": merge,
        "inputs_offered": "0",
        "parcels_created": "0",
        "inputs_assigned": "0",
        "inputs_problematic": "0",
        "inputs_delayed": "0",
        "failure": "",
        "failure_class": "",
    }

    reset = await dxts("inputs", "reset", merge, "--status", "problematic")
    assert (reset.exit_code, reset.stdout) == (0, "0 inputs reset\n")
    written = await dxts("inputs", "write-off", merge, "--status", "Unassigned", "-o", "json")
    assert written.exit_code == 0, written.output
    assert int(json.loads(written.stdout)["written_off_count"]) == 0
    for args in (
        ("inputs", "write-off", merge),  # neither --id nor --status
        ("inputs", "reset", merge, "--status", "sleeping"),
    ):
        refused = await dxts(*args)
        assert refused.exit_code == 1 and len(refused.stderr.splitlines()) == 1, refused.output


async def test_a_user_job_is_submitted_and_read_back(dxts: Dxts) -> None:
    submitted_job = await dxts(
        "job",
        "submit",
        str(EXAMPLES / "simulate-job.cwl"),
        "--inputs",
        str(EXAMPLES / "simulate-job.yaml"),
        "--label",
        "who=tests",
    )
    assert submitted_job.exit_code == 0, submitted_job.output
    parcel = submitted_job.stdout.strip()
    status = json.loads((await dxts("job", "status", parcel, "-o", "json")).stdout)
    assert status["parcel"]["parcel_id"] == parcel
    assert status["parcel"]["status"] == "Unassigned"
    assert status["compute"]["parameters"] == {"seeds": ["42", "43"]}
    text = await dxts("job", "status", parcel)
    assert text.exit_code == 0 and "Unassigned" in text.stdout


async def test_provenance_of_a_file_nobody_produced(dxts: Dxts) -> None:
    result = await dxts("provenance", "/no/such/file")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "error: file /no/such/file not found\n"


@pytest.mark.parametrize("output", ["text", "json"])
async def test_watch_gives_up_at_its_timeout(dxts: Dxts, output: str) -> None:
    workgraph, _ = await submitted(dxts, start=False)
    watched = await dxts("watch", workgraph, "--timeout", "0", "-o", output)
    assert watched.exit_code == 5, watched.output
    if output == "json":
        found = json.loads(watched.stdout)
        assert (found["status"], found["exit"]) == ("New", 5)
    else:
        assert f"{workgraph} still New" in watched.stdout


async def failed_input(database: Database, transformation_id: str) -> str:
    """A Failed input of the member, written by hand with its journal (no sweep runs here)."""
    tid, input_id = id_from_str(transformation_id), new_id()
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        await conn.execute(
            sa.insert(execution.inputs).values(
                TransformationID=tid,
                InputID=input_id,
                InputHash=input_hash(None, {"seed": 7}),
                Descriptor={"seed": 7},
                Status="Failed",
                ErrorCount=1,
                UpdatedAt=await db_now(conn),
            )
        )
        await journal_inputs(conn, {(tid, None, "Failed"): 1})
    return id_to_str(input_id)


async def test_an_operator_decides_a_failed_input(dxts: Dxts, database: Database) -> None:
    _, members = await submitted(dxts)
    simulation = members["Simulation"]
    input_id = await failed_input(database, simulation)
    decide = ("inputs", "decide", simulation, input_id)
    for args, said in (
        (("write-off", "--reason", "x", "--backend", "slurm"), "write-off does not take --backend"),
        (("split", "--reason", "x"), "split needs --children"),
        (("retry",), "reason  say why"),
        (("split", "--reason", "x", "--children", "@/no/such.json"), "cannot read /no/such.json"),
        (("split", "--reason", "x", "--children", "[]"), "a JSON list of at least one child"),
    ):
        refused = await dxts(*decide, *args)
        assert refused.exit_code == 1 and said in refused.stderr, refused.output
        assert len(refused.stderr.splitlines()) == 1, refused.output

    halves = json.dumps([{"descriptor": {"seed": 7, "half": h}} for h in (1, 2)])
    split = await dxts(*decide, "split", "--children", halves, "--reason", "too many events")

    assert split.exit_code == 0, split.output
    head, children = split.stdout.strip().split(": 2 children, ")
    assert head == f"input {input_id} Split" and len(children.split(", ")) == 2
    again = await dxts(*decide, "retry", "--reason", "once more")
    assert again.exit_code == 1 and "is Split: only a Failed input" in again.stderr
