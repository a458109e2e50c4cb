"""Names a person can type (issue 32): every workgraph, member and parcel has a short handle
(`wg-42`, `wg-42/Reco`, `p-10293`) that every verb and `dxts open` take beside the full id and
WG/STEP; action numbers need no `#`; an unknown or ambiguous name is one line; another VO's
handle names nothing. Against the services, on both databases."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from cli_support import EXAMPLES, Dxts
from typer.testing import CliRunner, Result

from dxts.cli.main import app
from dxts.cli.up import Stack
from dxts.core.grpc import DevKeys
from dxts.core.grpc.ports import free_port

HANDLE = re.compile(r"wg-[0-9]+")
STEPS = ("Simulation", "Reconstruction", "Merge", "DatasetReplication")


@pytest.fixture(scope="module")
async def workgraph(dxts: Dxts) -> dict[str, str]:
    """A submitted mc-demo: its id, its handle and its members' handles, by step."""
    submitted = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"), "--label", "campaign=2026")
    assert submitted.exit_code == 0, submitted.output
    shown = json.loads((await dxts("show", submitted.stdout.strip(), "-o", "json")).stdout)
    found = {"id": shown["workgraph"]["workgraph_id"], "handle": shown["workgraph"]["handle"]}
    found |= {m["transformation"]["step"]: m["transformation"]["handle"] for m in shown["members"]}
    return found


@pytest.fixture(scope="module")
def outsider(stack: Stack, dev_keys: DevKeys) -> Dxts:
    """The command as an operator of another VO."""
    runner = CliRunner()
    options = ["--token", dev_keys.issue("elsewhere", "eve", ["operator"])]
    for name in ("definition", "execution", "accounting"):
        options += [f"--{name}", stack.address(name)]

    async def invoke(*args: str) -> Result:
        return await asyncio.to_thread(runner.invoke, app, [*options, *args])

    return invoke


async def test_workgraphs_and_members_have_short_handles(workgraph: dict[str, str]) -> None:
    assert HANDLE.fullmatch(workgraph["handle"])
    for step in STEPS:
        assert workgraph[step] == f"{workgraph['handle']}/{step}"


async def test_every_verb_takes_the_handle_the_id_and_wg_slash_step(
    dxts: Dxts, workgraph: dict[str, str]
) -> None:
    handle, full = workgraph["handle"], workgraph["id"]
    for name in (handle, handle.upper(), full):
        shown = await dxts("show", name, "-o", "json")
        assert shown.exit_code == 0, (name, shown.output)
        assert json.loads(shown.stdout)["workgraph"]["workgraph_id"] == full
        logged = await dxts("logs", name, "-o", "json")
        assert logged.exit_code == 0, (name, logged.output)
    for name in (workgraph["Merge"], f"{full}/Merge", f"{handle}/merge"):
        why = await dxts("why", name, "--all")
        assert (why.exit_code, why.stdout.split(" is ")[0]) == (0, workgraph["Merge"]), why.output
        quiet = await dxts("why", name)
        assert quiet.stdout.startswith(f"nothing needs attention: {workgraph['Merge']} is "), (
            quiet.output
        )
        inputs = await dxts("inputs", name)
        assert inputs.exit_code == 0, inputs.output


async def test_show_of_a_member_shows_that_member(dxts: Dxts, workgraph: dict[str, str]) -> None:
    shown = await dxts("show", workgraph["Reconstruction"], "-o", "json")
    assert shown.exit_code == 0, shown.output
    found = json.loads(shown.stdout)
    assert found["workgraph"]["workgraph_id"] == workgraph["id"]
    assert [m["transformation"]["step"] for m in found["members"]] == ["Reconstruction"]
    text = await dxts("show", workgraph["Reconstruction"])
    assert text.exit_code == 0 and f"\n{workgraph['Reconstruction']} " in text.stdout


async def test_an_unknown_name_is_one_line(dxts: Dxts, workgraph: dict[str, str]) -> None:
    for args, line in (
        (("show", "wg-999999"), "error: workgraph wg-999999 not found"),
        (("pause", "nonsense"), "error: workgraph or member nonsense not found"),
        (("parcel", "p-999999"), "error: parcel p-999999 not found"),
        (
            ("show", "p-1"),
            "error  WG  p-1 is a parcel (see `dxts parcel p-1`), not a workgraph or a member",
        ),
        (
            ("why", f"{workgraph['handle']}/Nope"),
            f"error  WG|TF  {workgraph['handle']} has no member 'Nope' (its members: "
            "DatasetReplication, Merge, Reconstruction, Simulation)",
        ),
    ):
        result = await dxts(*args)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", line + "\n"), args


async def test_an_ambiguous_prefix_names_the_candidates_by_handle(
    dxts: Dxts, workgraph: dict[str, str]
) -> None:
    shown = json.loads((await dxts("show", workgraph["id"], "-o", "json")).stdout)
    ids = [m["transformation"]["transformation_id"] for m in shown["members"]]
    shared = ids[0][
        : next(i for i, (a, b) in enumerate(zip(ids[0], ids[1], strict=True)) if a != b)
    ]
    result = await dxts("pause", shared)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error  TF  {shared!r} is ambiguous: it starts ")
    assert workgraph["Simulation"] in line and workgraph["Reconstruction"] in line


async def test_another_vos_handle_names_nothing(
    dxts: Dxts, outsider: Dxts, workgraph: dict[str, str]
) -> None:
    handle = workgraph["handle"]
    for name, line in (
        (handle, f"workgraph {handle} not found"),
        (workgraph["Merge"], f"workgraph {handle} not found"),
        (workgraph["id"], f"workgraph or member {workgraph['id']} not found"),
    ):
        result = await outsider("show", name)
        assert (result.exit_code, result.stderr) == (1, f"error: {line}\n")
    prefix = workgraph["id"][:-2]  # its members share all but the last few digits
    assert (await dxts("show", prefix)).exit_code == 0
    hidden = await outsider("show", prefix)
    assert hidden.stderr == f"error: workgraph or member id starting with {prefix} not found\n"


async def test_a_parcel_is_named_by_its_handle(dxts: Dxts, outsider: Dxts) -> None:
    submitted = await dxts(
        "job",
        "submit",
        str(EXAMPLES / "simulate-job.cwl"),
        "--inputs",
        str(EXAMPLES / "simulate-job.yaml"),
    )
    assert submitted.exit_code == 0, submitted.output
    parcel = submitted.stdout.strip()
    described = json.loads((await dxts("parcel", parcel, "-o", "json")).stdout)
    handle = described["parcel"]["handle"]
    assert re.fullmatch(r"p-[0-9]+", handle), handle
    by_handle = await dxts("parcel", handle)
    assert by_handle.exit_code == 0, by_handle.output
    assert by_handle.stdout.startswith(f"parcel {handle} ({parcel}): Compute, Unassigned")
    status = await dxts("job", "status", handle, "-o", "json")
    assert json.loads(status.stdout)["parcel"]["parcel_id"] == parcel
    assert (await dxts("parcel", parcel[:18])).exit_code == 0  # a prefix of its id
    hidden = await outsider("parcel", handle)
    assert (hidden.exit_code, hidden.stderr) == (1, f"error: parcel {handle} not found\n")


@pytest.mark.parametrize("typed", ["999999", "#999999"])
async def test_an_action_is_named_by_its_number_with_or_without_the_hash(
    dxts: Dxts, typed: str
) -> None:
    """The number reaches the service either way (which says no such action exists)."""
    for verb in (("force", typed, "passed"), ("reset", typed)):
        result = await dxts(*verb)
        assert (result.exit_code, result.stderr) == (1, "error: action 999999 not found\n")


async def test_a_word_is_not_an_action_number(dxts: Dxts) -> None:
    result = await dxts("force", "abc", "passed")
    assert result.exit_code == 1
    assert result.stderr == (
        "error  ACTION  'abc' is not an action number: give the number `dxts show WG` prints "
        "(27 or '#27')\n"
    )


async def test_open_resolves_the_name_before_asking_the_web_view(
    dxts: Dxts, workgraph: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    web = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    monkeypatch.setenv("DXTS_WEB_URL", web)
    nothing = await dxts("open", "nonsense", "--no-browser")
    assert (nothing.exit_code, nothing.stdout) == (1, "")
    assert nothing.stderr == "error: workgraph or member nonsense not found\n"
    for name in (workgraph["handle"], workgraph["Merge"]):
        found = await dxts("open", name, "--no-browser")  # named: on to the (absent) web view
        assert found.exit_code == 1
        assert found.stderr.startswith(f"error: cannot reach the web view at {web}")
        assert len(found.stderr.splitlines()) == 1


async def test_list_and_show_print_handles_within_80_columns(
    dxts: Dxts, workgraph: dict[str, str]
) -> None:
    listed = await dxts("list")
    assert listed.exit_code == 0, listed.output
    assert all(len(line) <= 80 for line in listed.stdout.splitlines()), listed.stdout
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(workgraph["handle"])]
    assert row.split()[-3:] == ["New", "0/0" if "0/0" in row else "-", "campaign=2026"]
    shown = await dxts("show", workgraph["handle"])
    assert shown.exit_code == 0, shown.output
    assert all(len(line) <= 80 for line in shown.stdout.splitlines()), shown.stdout
    assert "labels campaign=2026" in shown.stdout
