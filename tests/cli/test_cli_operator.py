"""Issue 18 against the services: members named as WG/Step, ids of the wrong kind recognised,
ids in `show`, feeder args by key, `why`, parcels and inputs, plain JSON, and every command fed
bad input answering in one line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from cli_support import EXAMPLES, Dxts

from dxts.cli.main import VERBS, app

NO_SUCH_ID = "01a00000-0000-7000-8000-000000000000"


@pytest.fixture(scope="module")
async def workgraph(dxts: Dxts) -> str:
    result = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"))
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


async def shown(dxts: Dxts, workgraph: str) -> dict[str, Any]:
    result = await dxts("show", workgraph, "-o", "json")
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


async def member_ids(dxts: Dxts, workgraph: str) -> dict[str, str]:
    return {
        m["transformation"]["step"]: m["transformation"]["transformation_id"]
        for m in (await shown(dxts, workgraph))["members"]
    }


async def handle_of(dxts: Dxts, workgraph: str) -> str:
    return str((await shown(dxts, workgraph))["workgraph"]["handle"])


async def test_a_member_is_named_as_workgraph_slash_step(dxts: Dxts, workgraph: str) -> None:
    tf = (await member_ids(dxts, workgraph))["Simulation"]
    logged = await dxts("logs", f"{workgraph}/Simulation", "-o", "json")
    assert logged.exit_code == 0, logged.output
    assert {entry["transformation_id"] for entry in json.loads(logged.stdout)} <= {tf}
    listed = await dxts("inputs", f"{workgraph}/simulation")  # the step's case is forgiven
    assert (listed.exit_code, listed.stdout.splitlines()[-1]) == (0, "0 inputs")
    missing = await dxts("parcels", f"{workgraph}/Nope")
    assert missing.exit_code == 1
    assert missing.stderr == (
        f"error  TF  {await handle_of(dxts, workgraph)} has no member 'Nope' (its members: "
        "DatasetReplication, Merge, Reconstruction, Simulation)\n"
    )


async def test_an_id_of_the_other_kind_is_recognised(dxts: Dxts, workgraph: str) -> None:
    tf = (await member_ids(dxts, workgraph))["Merge"]
    handle = await handle_of(dxts, workgraph)
    paused = await dxts("pause", workgraph)
    assert paused.exit_code == 1
    assert paused.stderr == (
        f"error  TF  {workgraph} is a workgraph, not a member: name a member as "
        f"{handle}/STEP (see `dxts show {handle}`)\n"
    )
    drained = await dxts("drain", tf)
    assert drained.exit_code == 1
    assert drained.stderr == (
        f"error  WG  {tf} is a member ({handle}/Merge) of {handle}, not a workgraph\n"
    )


async def visible_ids(dxts: Dxts) -> list[str]:
    """Every workgraph and member id the operator can see."""
    listed = await dxts("list", "-o", "json")
    assert listed.exit_code == 0, listed.output
    found = []
    for w in json.loads(listed.stdout):
        found += [w["workgraph_id"], *(await member_ids(dxts, w["workgraph_id"])).values()]
    return found


def common_prefix(one: str, other: str) -> str:
    return one[
        : next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b), len(one))
    ]


async def test_an_id_is_named_by_a_prefix_only_it_starts_with(dxts: Dxts, workgraph: str) -> None:
    ids = await member_ids(dxts, workgraph)
    tf = ids["Simulation"]
    others = [i for i in await visible_ids(dxts) if i != tf]
    unique = tf[: max(4, *(len(common_prefix(tf, o)) + 1 for o in others))]
    assert len(unique) < len(tf) and not any(o.startswith(unique) for o in others)
    listed = await dxts("inputs", unique)
    assert (listed.exit_code, listed.stdout.splitlines()[-1]) == (0, "0 inputs"), listed.output
    short_wg = workgraph[: max(4, *(len(common_prefix(workgraph, o)) + 1 for o in others))]
    shown_short = await dxts("show", short_wg, "-o", "json")
    assert shown_short.exit_code == 0, shown_short.output
    assert json.loads(shown_short.stdout)["workgraph"]["workgraph_id"] == workgraph
    named = await dxts("why", f"{short_wg}/Simulation")
    assert named.exit_code == 0, named.output


async def test_an_ambiguous_or_too_short_prefix_is_refused_naming_the_candidates(
    dxts: Dxts, workgraph: str
) -> None:
    ids = await member_ids(dxts, workgraph)
    shared = common_prefix(ids["Simulation"], ids["Merge"])
    assert len(shared) >= 4  # ids of one submission share their time-ordered start
    result = await dxts("pause", shared)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error  TF  {shared!r} is ambiguous: ")
    assert "give more characters" in line
    assert f"transformation {ids['Simulation']}" in line or "more" in line
    short = await dxts("pause", shared[:3])
    assert short.exit_code == 1
    assert short.stderr == (
        f"error  TF  {shared[:3]!r} is too short to name anything: give a handle (wg-42) or at "
        "least 4 hex digits of an id\n"
    )
    nothing = await dxts("show", "ffff")
    assert (nothing.exit_code, nothing.stderr) == (
        1,
        "error: workgraph or member id starting with ffff not found\n",
    )


async def test_show_prints_member_handles_and_how_to_name_them(dxts: Dxts, workgraph: str) -> None:
    result = await dxts("show", workgraph)
    assert result.exit_code == 0, result.output
    handle = await handle_of(dxts, workgraph)
    assert workgraph in result.stdout  # the full id, under the title
    for step in await member_ids(dxts, workgraph):
        assert f"\n{handle}/{step} " in result.stdout
    assert f"as {handle}/STEP" in " ".join(result.stdout.split())
    # `why`'s reasons, under the table.
    assert f"why: it has not been started: dxts start {handle}\n" in result.stdout


async def test_json_is_plain_nested_json_with_plain_status_names(
    dxts: Dxts, workgraph: str
) -> None:
    found = await shown(dxts, workgraph)

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            assert not [key for key in value if key.endswith("_json")], value.keys()
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            assert "_STATUS_" not in value and not value.startswith("KIND_"), value

    walk(found)
    assert found["workgraph"]["status"] == "New"
    assert found["members"][0]["transformation"]["kind"] == "Compute"
    assert isinstance(found["members"][0]["transformation"]["feeder_args"], dict)


async def test_feeder_args_change_the_named_keys_and_feeder_show_reads_them(dxts: Dxts) -> None:
    submitted = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"))
    workgraph = submitted.stdout.strip()
    started = await dxts("start", workgraph)
    assert started.exit_code == 0, started.output
    member = f"{workgraph}/Simulation"
    before = json.loads((await dxts("feeder", "show", member, "-o", "json")).stdout)
    changed = await dxts("feeder", "args", member, "target_events=12", "-o", "json")
    assert changed.exit_code == 0, changed.output
    merged = await dxts("feeder", "args", member, "--merge", '{"events_per_seed": 3}')
    assert merged.exit_code == 0, merged.output
    after = json.loads((await dxts("feeder", "show", member, "-o", "json")).stdout)
    assert after["args"] == {**before["args"], "target_events": 12, "events_per_seed": 3}
    assert after["feeder"] == "Seeds" and after["enabled"] is True
    assert after["bookmark"] is None  # nothing fed yet (the tests' services run no sweeps)
    text = await dxts("feeder", "show", member)
    assert '"target_events": 12' in text.stdout and "bookmark" in text.stdout
    refused = await dxts("feeder", "args", member, "target_events=0")
    assert refused.exit_code == 1 and len(refused.stderr.splitlines()) == 1
    assert "target_events" in refused.stderr


async def test_why_says_what_holds_a_new_workgraph(dxts: Dxts, workgraph: str) -> None:
    result = await dxts("why", workgraph)
    assert result.exit_code == 0, result.output
    handle = await handle_of(dxts, workgraph)
    assert result.stdout.splitlines()[0] == f"it has not been started: dxts start {handle}"
    every = (await dxts("why", workgraph, "--all")).stdout.splitlines()
    assert every[:2] == [
        f"workgraph {handle} is New",
        f"it has not been started: dxts start {handle}",
    ]
    member = await dxts("why", f"{workgraph}/Merge", "--all")
    assert member.exit_code == 0, member.output
    assert member.stdout.startswith(f"{handle}/Merge is ")


async def test_parcels_and_a_parcel_that_does_not_exist(dxts: Dxts, workgraph: str) -> None:
    listed = await dxts("parcels", f"{workgraph}/Simulation", "--status", "failed")
    assert (listed.exit_code, listed.stdout.splitlines()[-1]) == (0, "0 parcels")
    missing = await dxts("parcel", NO_SUCH_ID)
    assert missing.exit_code == 1 and len(missing.stderr.splitlines()) == 1
    assert NO_SUCH_ID in missing.stderr


async def test_the_logs_of_a_parcel_never_dispatched_or_unknown_are_one_line(
    dxts: Dxts,
) -> None:
    missing = await dxts("parcel", NO_SUCH_ID, "--logs")
    assert (missing.exit_code, missing.stderr) == (1, f"error: parcel {NO_SUCH_ID} not found\n")
    malformed = await dxts("parcel", "not-an-id", "--logs")
    assert malformed.exit_code == 1
    assert malformed.stderr == "error: parcel not-an-id not found\n"


async def test_an_empty_document_is_refused_in_one_line(dxts: Dxts, tmp_path: Path) -> None:
    empty = tmp_path / "empty.cwl"
    empty.write_text("")
    result = await dxts("submit", str(empty))
    assert result.exit_code == 1
    assert result.stderr == "error  invalid-cwl  .  empty.cwl: is empty\n"


BAD_INPUTS = (
    ("not-an-id",),
    (NO_SUCH_ID,),
    (f"{NO_SUCH_ID}/Step",),
    ("not-an-id", "--output", "yaml"),
    ("--no-such-option",),
)


NAMES_ANYTHING = {"registry versions"}


def every_command() -> list[str]:
    """Every verb, and every sub-verb of a verb that has them (`feeder args`, `inputs reset`)."""
    group = typer.main.get_command(app)
    context = typer.Context(group)
    found = []
    for verb in VERBS:
        command = group.get_command(context, verb)  # type: ignore[attr-defined]
        found += [f"{verb} {sub}" for sub in getattr(command, "commands", {})] or [verb]
    return found


@pytest.mark.parametrize("command", every_command())
async def test_every_command_answers_bad_input_without_a_traceback(
    dxts: Dxts, command: str
) -> None:
    for bad in BAD_INPUTS:
        result = await dxts(*command.split(), *bad)
        said = f"dxts {command} {' '.join(bad)}: {result.output}"
        if command in NAMES_ANYTHING and len(bad) == 1 and not bad[0].startswith("-"):
            # A process name is free text: one nothing is published under lists no versions.
            assert (result.exit_code, result.stderr) == (0, ""), said
            continue
        assert result.exit_code not in (0, None), said
        assert result.exception is None or isinstance(result.exception, SystemExit), said
        assert "Traceback" not in result.output, said
        assert result.exit_code in (1, 2), said
        if result.exit_code == 2 and "Usage:" in result.stderr:
            continue  # typer's usage error, naming the argument or option at fault
        (line,) = result.stderr.splitlines()  # refused: one line
        assert line.startswith("error"), said
