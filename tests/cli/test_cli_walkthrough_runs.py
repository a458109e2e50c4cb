"""The operator walkthrough (docs/operating.md), run: every `dxts` line of its code blocks, in its
order and as it is written there, against `dxts up` as a process of its own (on the embedded
SQLite default, and on MariaDB with `--db-url` added), each followed by what the walkthrough
says the operator then sees. `SCRIPT` is checked to be exactly the walkthrough's lines, so the
two cannot drift apart; the commands find the services as the walkthrough says, through
`~/.dxts/current` (HOME is a temporary directory here), and placeholders (ACTION, PARCEL,
INPUT, LFN) are filled in as an operator would, from what the services show."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import walkthrough_lines
from typer.testing import CliRunner, Result

from dxts.cli.main import app
from dxts.cli.operate import IN_MOTION
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer as Definition

ROOT = Path(__file__).parents[2]
DXTS = [sys.executable, "-c", "import sys; from dxts.cli.main import app; sys.exit(app())"]
UP = "dxts up --data-dir /tmp/dxts-walkthrough &"
START_TIMEOUT_S = 60
# A bound on each wait for the sweeps, not a measure of them.
RUN_TIMEOUT_S = 240


class Walk:
    """An operator's session: `dxts up` running, the shell variables the walkthrough sets, and
    the `dxts` command run as typed."""

    def __init__(self, data_dir: Path, up_options: list[str]) -> None:
        self.data_dir = data_dir
        self.up_options = up_options
        self.process: subprocess.Popen[bytes] | None = None
        self.runner = CliRunner()
        self.variables: dict[str, str] = {}
        self.filled: dict[str, str] = {}  # each placeholder's value on the line last run
        self.current = ""  # the workgraph the walkthrough is about: the last one submitted

    # -- running the walkthrough's lines ---------------------------------------------------------

    def up(self, line: str) -> None:
        """The walkthrough's `dxts up` line, in this test's data directory."""
        args = shlex.split(line.rstrip("&").replace("/tmp/dxts-walkthrough", str(self.data_dir)))
        self.process = subprocess.Popen(
            [*DXTS, *args[1:], *self.up_options],
            stdout=subprocess.DEVNULL,
            stderr=(self.data_dir.parent / "up.err").open("ab"),
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (self.data_dir / "connection.json").exists():
            assert self.process.poll() is None, (self.data_dir.parent / "up.err").read_text()
            assert time.monotonic() < deadline, "dxts up did not come up"
            time.sleep(0.2)

    def run(self, line: str) -> Result:
        """One line, its variables and placeholders filled in; `VAR=$(dxts ...)` sets VAR."""
        assigned = re.match(r"^(\w+)=\$\((.*)\)$", line)
        command = assigned.group(2) if assigned else line
        args = [self.fill(arg) for arg in shlex.split(command)[1:]]
        result = self.runner.invoke(app, args)
        if assigned:
            assert result.exit_code == 0, result.output
            self.variables[assigned.group(1)] = self.current = result.stdout.strip()
        return result

    def fill(self, arg: str) -> str:
        arg = re.sub(r"\$(\w+)", lambda m: self.variables[m.group(1)], arg)
        placeholders: dict[str, Callable[[], str]] = {
            "ACTION": lambda: str(self.blocking_action()),
            "PARCEL": self.parcel,
            "LFN": self.lfn,
            "INPUT": self.input,
        }
        if arg in placeholders:
            self.filled[arg] = placeholders[arg]()
            return self.filled[arg]
        return arg

    # -- what the operator reads -----------------------------------------------------------------

    def json(self, *args: str) -> Any:
        result = self.runner.invoke(app, [*args, "--output", "json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def show(self, workgraph: str | None = None) -> dict[str, Any]:
        shown: dict[str, Any] = self.json("show", workgraph or self.current)
        return shown

    def member(self, step: str, shown: dict[str, Any] | None = None) -> dict[str, Any]:
        found = shown or self.show()
        return next(m for m in found["members"] if m["transformation"]["step"] == step)

    def member_id(self, step: str) -> str:
        return str(self.member(step)["transformation"]["transformation_id"])

    def member_handle(self, step: str) -> str:
        """What the commands print of a member: `wg-1/Simulation`."""
        return str(self.member(step)["transformation"]["handle"])

    def handle(self) -> str:
        """What the commands print of the current workgraph: `wg-1`."""
        return str(self.show()["workgraph"]["handle"])

    def blocking_action(self) -> int:
        (action,) = self.show()["blocked_by"]
        return int(action["action_id"])

    def parcel(self) -> str:
        """A Simulation parcel of the first workgraph, as `dxts parcels` lists them."""
        parcels = self.json("parcels", f"{self.variables['WG']}/Simulation")
        return str(sorted(p["parcel_id"] for p in parcels)[0])

    def lfn(self) -> str:
        (output,) = self.json("parcel", self.parcel())["outputs"]
        return str(output["lfn"])

    def input(self) -> str:
        inputs = self.json("inputs", f"{self.variables['WG']}/Simulation")
        return str(sorted(i["input_id"] for i in inputs)[0])

    def until(self, what: str, holds: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Poll `show` until `holds` (the state the walkthrough says comes next)."""
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not holds(shown := self.show()):
            assert time.monotonic() < deadline, f"never {what}: {summary(shown)}\n{self.story()}"
            time.sleep(0.5)
        return shown

    def story(self) -> str:
        """The logs of the workgraph and its members, for a wait that timed out: what the
        services decided, and when."""
        told = self.runner.invoke(app, ["logs", self.current, "--limit", "60"]).output
        for step in ("Simulation", "Reconstruction"):
            told += self.runner.invoke(app, ["logs", f"{self.current}/{step}"]).output
        return told


def summary(shown: dict[str, Any]) -> str:
    """The workgraph's status and each member's status, feeder and input counts."""
    members = [
        f"{m['transformation']['step']} {m['transformation']['status']}"
        f" feeder {'on' if m['transformation']['feeder_enabled'] else 'off'}"
        f" {counts(shown, m['transformation']['step'])}"
        for m in shown["members"]
    ]
    return "; ".join([shown["status"], *members])


def counts(shown: dict[str, Any], step: str) -> dict[str, int]:
    """A member's input counts, without the zeros."""
    member = next(m for m in shown["members"] if m["transformation"]["step"] == step)
    return {status: n for status, n in member["input_counts"].items() if n}


def state(shown: dict[str, Any], step: str) -> tuple[str, bool]:
    """A member's status and whether its feeder is on."""
    member = next(m for m in shown["members"] if m["transformation"]["step"] == step)
    return member["transformation"]["status"], bool(member["transformation"]["feeder_enabled"])


# -- what each line of the walkthrough is said to do ---------------------------------------------

Check = Callable[[Walk, Result], None]


def ok(result: Result) -> None:
    assert result.exit_code == 0, result.output


def valid(result: Result) -> None:
    """`validate` on a valid document: its one-line verdict."""
    assert (result.exit_code, result.output) == (0, "scout-approve.cwl: valid, 2 members\n")


def says(expected: Callable[[Walk], str]) -> Check:
    """The command succeeds and prints exactly that."""

    def check(walk: Walk, result: Result) -> None:
        ok(result)
        assert result.stdout == expected(walk) + "\n"

    return check


def shows(*fragments: Callable[[Walk], str]) -> Check:
    """The command succeeds and its output holds each fragment."""

    def check(walk: Walk, result: Result) -> None:
        ok(result)
        for fragment in fragments:
            assert fragment(walk) in result.stdout, (fragment(walk), result.stdout)

    return check


def and_then(first: Check, second: Callable[[Walk], object]) -> Check:
    def check(walk: Walk, result: Result) -> None:
        first(walk, result)
        second(walk)

    return check


def watched_to(code: int, status: str) -> Check:
    def check(walk: Walk, result: Result) -> None:
        assert result.exit_code == code, result.output
        assert status in result.stdout, result.stdout

    return check


def scouted(seeds: int, scouting_events: int) -> Check:
    """`watch` stops at the sign-off once the scout's `seeds` are simulated (what the checks
    judge); their files are reconstructed meanwhile, some perhaps after the stop."""

    def check(walk: Walk, result: Result) -> None:
        watched_to(3, "ApprovingBlocked")(walk, result)
        assert "ManualApproval" in result.stdout
        shown = walk.show()
        assert shown["status"] == "ApprovingBlocked"
        assert counts(shown, "Simulation") == {"Processed": seeds}
        shown = walk.until(
            f"the scout's {seeds} files reconstructed",
            lambda s: counts(s, "Reconstruction") == {"Processed": seeds},
        )
        assert shown["status"] == "ApprovingBlocked"
        feeder = walk.member("Simulation", shown)["transformation"]["feeder_args"]
        assert feeder["scouting_events"] == scouting_events

    return check


def member_line(
    step: str, status: str, feeder: str, rpc: Callable[..., object] | None = None
) -> Callable[[Walk], str]:
    """What a steering verb prints of a member (the walkthrough's first workgraph or the current
    one): its id, status and feeder, and what the verb set in motion."""

    def line(walk: Walk) -> str:
        said = f"{walk.member_handle(step)} {status}, feeder {feeder}"
        return f"{said}: {IN_MOTION[rpc]}" if rpc else said

    return line


def workgraph_line(status: str, rpc: Callable[..., object] | None = None) -> Callable[[Walk], str]:
    def line(walk: Walk) -> str:
        said = f"{walk.handle()} {status}"
        return f"{said}: {IN_MOTION[rpc]}" if rpc else said

    return line


def action_line(result: str) -> Callable[[Walk], str]:
    def line(walk: Walk) -> str:
        return f"action #{walk.filled['ACTION']} ManualApproval: {result}"

    return line


def submitted(walk: Walk) -> None:
    shown = walk.show()
    assert shown["status"] == "New"
    assert [m["transformation"]["step"] for m in shown["members"]] == [
        "Simulation",
        "Reconstruction",
    ]


def requirements_logged(walk: Walk, result: Result) -> None:
    ok(result)
    entries = walk.json("logs", f"{walk.variables['WG']}/Simulation")
    (derived,) = [e for e in entries if e["event_type"] == "Requirements"]
    assert derived["data"]["derived"]["cpu_hours"]["percentile"] == 95


def descended(walk: Walk, result: Result) -> None:
    ok(result)
    (record,) = walk.json("descendants", walk.lfn())["records"]
    assert record["input"]["transformation_id"] == walk.member_id("Reconstruction")
    assert record["input"]["status"] == "Processed"


def last_seed_simulated(walk: Walk) -> None:
    shown = walk.until(
        "the sixth seed simulated",
        lambda s: (
            s["status"] == "Active"
            and counts(s, "Simulation") == {"Processed": 6}
            and state(s, "Simulation") == ("Active", False)
        ),
    )
    assert state(shown, "Reconstruction") == ("Paused", True)
    assert counts(shown, "Reconstruction") == {"Processed": 5}


def lone_file_held(walk: Walk) -> None:
    walk.until("the sixth file fed", lambda s: counts(s, "Reconstruction").get("Unassigned") == 1)


def lone_file_packed(walk: Walk) -> None:
    shown = walk.until(
        "the lone file reconstructed",
        lambda s: counts(s, "Reconstruction") == {"Processed": 6},
    )
    assert shown["status"] == "Active"  # the paused Simulation keeps it open
    assert state(shown, "Simulation")[0] == "Paused"


def completed(walk: Walk, result: Result) -> None:
    watched_to(0, f"{walk.current} Completed")(walk, result)
    shown = walk.show()
    assert shown["status"] == "Completed"
    assert counts(shown, "Simulation") == counts(shown, "Reconstruction") == {"Processed": 6}
    assert walk.member("Simulation", shown)["transformation"]["feeder_args"]["target_events"] == (
        12000
    )


def active_again(walk: Walk, result: Result) -> None:
    """`show` says Active once the lifecycle has taken the sign-off (shown again until then)."""
    ok(result)
    shown = walk.until("Active", lambda s: s["status"] == "Active")
    assert state(shown, "Simulation") == ("Paused", True)
    again = walk.run("dxts show $WG2")
    ok(again)
    assert "Active" in again.stdout


def refused(expected: Callable[[Walk], str]) -> Check:
    def check(walk: Walk, result: Result) -> None:
        assert (result.exit_code, result.stdout) == (1, ""), result.output
        assert result.stderr == expected(walk) + "\n"

    return check


SCRIPT: list[tuple[str, Check]] = [
    ("dxts validate examples/scout-approve.cwl", lambda w, r: valid(r)),
    ("WG=$(dxts submit examples/scout-approve.cwl)", lambda w, r: submitted(w)),
    ("dxts show $WG", shows(lambda w: w.member_handle("Simulation"), lambda w: "New")),
    ("dxts start $WG", says(workgraph_line("Scouting", Definition.StartWorkgraph))),
    ("dxts watch $WG --timeout 600", scouted(2, 4000)),
    ("dxts why $WG", shows(lambda w: f"#{w.blocking_action()} ManualApproval failed")),
    ("dxts parcels $WG/Simulation --status failed", shows(lambda w: "0 parcels")),
    ("dxts parcel PARCEL", shows(lambda w: f"({w.parcel()}): Compute, Done", Walk.lfn)),
    ("dxts parcel PARCEL --logs", shows(lambda w: "sandbox", lambda w: "-- stdout")),
    ("dxts inputs $WG/Simulation --status problematic", shows(lambda w: "0 inputs")),
    ("dxts logs $WG/Simulation", requirements_logged),
    ("dxts provenance LFN", shows(lambda w: w.parcel(), lambda w: "Done")),
    ("dxts descendants LFN", descended),
    ("dxts logs $WG/Simulation", requirements_logged),
    ("dxts parcel PARCEL", shows(lambda w: f"({w.parcel()}): Compute, Done")),
    ("dxts feeder show $WG/Simulation", shows(lambda w: '"scouting_events": 4000')),
    (
        "dxts feeder args $WG/Simulation scouting_events=6000",
        shows(lambda w: '"scouting_events":6000'),
    ),
    ("dxts feeder args $WG/Simulation --merge '{\"batch\": 3}'", shows(lambda w: '"batch":3')),
    ("dxts extend-scout $WG", says(workgraph_line("Scouting"))),
    ("dxts watch $WG --timeout 600", scouted(4, 8000)),
    (
        'dxts extend-scout $WG --feeder-args $WG/Simulation=\'{"target_events": 12000,'
        ' "events_per_seed": 2000, "scouting_events": 10000}\'',
        says(workgraph_line("Scouting")),
    ),
    ("dxts watch $WG --timeout 600", scouted(5, 10000)),
    ("dxts reset ACTION", says(action_line("-"))),
    ("dxts watch $WG --timeout 600", scouted(5, 10000)),
    (
        "dxts pause $WG/Reconstruction",
        says(member_line("Reconstruction", "Paused", "on", Definition.PauseTransformation)),
    ),
    ('dxts force ACTION passed --message "scout looks right"', says(action_line("Passed"))),
    ("dxts show $WG", and_then(lambda w, r: ok(r), last_seed_simulated)),
    (
        "dxts pause $WG/Simulation",
        says(member_line("Simulation", "Paused", "off", Definition.PauseTransformation)),
    ),
    (
        "dxts resume $WG/Reconstruction",
        and_then(
            says(member_line("Reconstruction", "Active", "on", Definition.ResumeTransformation)),
            lone_file_held,
        ),
    ),
    (
        "dxts why $WG --all",
        shows(
            lambda w: "inputs still to process: Unassigned 1",
            lambda w: "waits on Simulation, still Paused",
        ),
    ),
    ("dxts inputs reset $WG/Simulation --status problematic", says(lambda w: "0 inputs reset")),
    ("dxts inputs write-off $WG/Simulation --id INPUT", says(lambda w: "0 inputs written off")),
    (
        "dxts flush $WG/Reconstruction",
        and_then(
            says(
                lambda w: (
                    f"{w.member_id('Reconstruction')} flushed: 1 parcel made of 1 input "
                    "(1 offered)"
                )
            ),
            lone_file_packed,
        ),
    ),
    ("dxts feeder disable $WG/Simulation", says(member_line("Simulation", "Paused", "off"))),
    ("dxts feeder enable $WG/Simulation", says(member_line("Simulation", "Paused", "on"))),
    (
        "dxts resume $WG/Simulation",
        says(member_line("Simulation", "Active", "on", Definition.ResumeTransformation)),
    ),
    ("dxts watch $WG --timeout 600", completed),
    ("WG2=$(dxts submit examples/scout-approve.cwl)", lambda w, r: submitted(w)),
    ("dxts start $WG2", says(workgraph_line("Scouting", Definition.StartWorkgraph))),
    ("dxts watch $WG2 --timeout 600", scouted(2, 4000)),
    (
        "dxts pause $WG2/Simulation",
        says(member_line("Simulation", "Paused", "on", Definition.PauseTransformation)),
    ),
    (
        'dxts force ACTION passed --message "a second copy, to end it early"',
        says(action_line("Passed")),
    ),
    ("dxts show $WG2", active_again),
    ("dxts drain $WG2", says(workgraph_line("Active", Definition.DrainWorkgraph))),
    ("dxts halt $WG2", says(workgraph_line("Active (halted)", Definition.HaltWorkgraph))),
    ("dxts cancel $WG2", says(workgraph_line("Cancelling (halted)", Definition.CancelWorkgraph))),
    ("dxts watch $WG2 --timeout 600", lambda w, r: watched_to(4, f"{w.current} Cancelled")(w, r)),
    (
        "dxts return-to-active $WG",
        refused(
            lambda w: (
                f"error: workgraph {w.variables['WG']} is Completed: returning to Active "
                "needs it Finalizing"
            )
        ),
    ),
]


@pytest.fixture(params=["sqlite", "mariadb"])
def up_options(request: pytest.FixtureRequest) -> list[str]:
    """`dxts up` as the walkthrough starts it (the embedded SQLite default), and on MariaDB."""
    if request.param == "sqlite":
        return []
    return ["--db-url", str(request.getfixturevalue("mysql_test_url"))]


@pytest.fixture
def walk(tmp_path: Path, up_options: list[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Walk]:
    """A shell of the walkthrough's reader: in the repository, a home of its own, no DXTS_*."""
    for variable in [v for v in os.environ if v.startswith("DXTS_")]:
        monkeypatch.delenv(variable)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(ROOT)
    session = Walk(tmp_path / "data", up_options)
    try:
        yield session
    finally:
        if session.process is not None:
            session.process.send_signal(signal.SIGTERM)
            try:
                session.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                session.process.kill()
                session.process.wait()


def test_the_script_is_the_walkthrough() -> None:
    assert [UP] + [line for line, _ in SCRIPT] == walkthrough_lines()


def test_the_walkthrough_runs_as_written(walk: Walk) -> None:
    first, *rest = walkthrough_lines()
    assert first == UP
    walk.up(first)
    assert (walk.data_dir.parent / "home" / ".dxts" / "current").read_text().strip() == str(
        walk.data_dir.resolve()
    )
    assert [line for line, _ in SCRIPT] == rest
    for line, check in SCRIPT:
        result = walk.run(line)
        try:
            check(walk, result)
        except AssertionError as failed:
            raise AssertionError(f"after `{line}`: {failed}") from failed
