"""The `dxts` command's verbs and global options as plain data, and its top-level help drawn
from them with nothing imported: `dxts --help` is answered from here (see `entry`), and the
typer application (`main`) is built from the same table and strings, so the two cannot drift.

The table is the one place a verb is added: name → (module, attribute, one-line help); the
attribute is a typer command function or a typer.Typer of sub-verbs.
"""

from __future__ import annotations

import os
import textwrap

SUMMARY = "dxts: the DiracX Transformation System."

VERBS: dict[str, tuple[str, str, str]] = {
    "validate": (
        "dxts.cli.validate",
        "validate",
        "Validate a workgraph and compile it, with no server.",
    ),
    "submit": ("dxts.cli.workgraphs", "submit", "Submit a workgraph; prints its id."),
    "list": ("dxts.cli.workgraphs", "list_workgraphs", "List workgraphs, newest last."),
    "show": ("dxts.cli.workgraphs", "show", "A workgraph and its members, with ids and counts."),
    "watch": ("dxts.cli.workgraphs", "watch", "Follow a workgraph until it ends or is blocked."),
    "logs": ("dxts.cli.workgraphs", "logs", "The log of a workgraph or a member."),
    "why": ("dxts.cli.inspect", "why", "What holds a workgraph or a member, in plain words."),
    "parcels": ("dxts.cli.inspect", "parcels", "A member's parcels, with their status."),
    "parcel": ("dxts.cli.inspect", "parcel", "One parcel: outcome, failure reason, usage, files."),
    "errors": ("dxts.cli.failures", "errors", "Failures grouped: what is failing, where, why."),
    "start": ("dxts.cli.operate", "start", "Start a New workgraph."),
    "pause": ("dxts.cli.operate", "pause", "Pause a member: its packer stops."),
    "resume": ("dxts.cli.operate", "resume", "Resume a paused member."),
    "drain": ("dxts.cli.operate", "drain", "Stop feeding; let the work in flight finish."),
    "halt": ("dxts.cli.operate", "halt", "Stop everything: cancel parcels, write off inputs."),
    "cancel": ("dxts.cli.operate", "cancel", "Cancel a workgraph: its outputs are removed."),
    "flush": ("dxts.cli.operate", "flush", "Pack what a member holds back as too small, once."),
    "force": ("dxts.cli.operate", "force", "Record an action's result yourself (a sign-off)."),
    "reset": ("dxts.cli.operate", "reset", "Clear an action's result so that it runs again."),
    "extend-scout": ("dxts.cli.operate", "extend_scout", "Back from Approving to Scouting."),
    "return-to-active": (
        "dxts.cli.operate",
        "return_to_active",
        "Back from Finalizing to Active.",
    ),
    "feeder": ("dxts.cli.operate", "feeder_app", "A member's feeder: enable, disable, args."),
    "inputs": (
        "dxts.cli.operate",
        "inputs_app",
        "A member's inputs: list, reset, write off, decide.",
    ),
    "job": ("dxts.cli.jobs", "job_app", "User jobs: one CWL process, one parcel."),
    "file": ("dxts.cli.files", "file_app", "Files in and out of the storage elements."),
    "registry": ("dxts.cli.jobs", "registry_app", "The process registry."),
    "provenance": ("dxts.cli.jobs", "provenance", "Where an output file came from."),
    "descendants": ("dxts.cli.jobs", "descendants", "What was made from a file, downstream."),
    "token": ("dxts.cli.tokens", "token_app", "Bearer tokens signed by the installation key."),
    "login": ("dxts.cli.diracx_login", "login", "Sign in with your DiracX identity."),
    "logout": ("dxts.cli.diracx_login", "logout", "Sign out of DiracX."),
    "whoami": (
        "dxts.cli.diracx_login",
        "whoami",
        "Your VO, name, group and roles, as dxts sees you.",
    ),
    "up": ("dxts.cli.up", "up", "Run every component in this process (embedded default)."),
    "open": ("dxts.cli.open_page", "open_page", "A page of the web view, with a one-time sign-in."),
    "adaptor": ("dxts.cli.adaptor_check", "adaptor_app", "Check a backend adaptor's contract."),
}


# The global options: name → (metavar, help), in the order `dxts --help` lists them.
OPTIONS: dict[str, tuple[str, str]] = {
    "data-dir": (
        "<path>",
        "The data directory of `dxts up`, whose connection file the commands read "
        "(default: DXTS_DATA_DIR, else the running `dxts up`'s, else ~/.dxts).",
    ),
    "definition": ("<str>", "host:port of the definition service."),
    "execution": ("<str>", "host:port of the execution service."),
    "accounting": ("<str>", "host:port of the accounting service."),
    "dispatcher": ("<str>", "host:port of the dispatcher (for a parcel's job logs)."),
    "token": ("<str>", "Bearer token (default: DXTS_TOKEN, else your `dxts login`)."),
}
# Typer's own options, which it adds to the application.
BUILT_IN: dict[str, tuple[str, str]] = {
    "install-completion": ("", "Install completion for the current shell."),
    "show-completion": (
        "",
        "Show completion for the current shell, to copy it or customize the installation.",
    ),
    "help": ("", "Show this message and exit."),
}


def help_text() -> str:
    """`dxts --help`, laid out as typer's (click's) formatter lays out the application's."""
    width = max(min(_columns(), 80) - 2, 50)
    options = {**OPTIONS, **BUILT_IN}
    lines = ["Usage: dxts [OPTIONS] COMMAND [ARGS]...", "", f"  {SUMMARY}", "", "Options:"]
    lines += _definitions(
        [(f"--{name} {metavar}".rstrip(), text) for name, (metavar, text) in options.items()],
        width,
    )
    lines += ["", "Commands:"]
    lines += _definitions([(verb, summary) for verb, (_, _, summary) in VERBS.items()], width)
    return "\n".join(lines) + "\n"


def _columns() -> int:
    try:
        return int(os.environ.get("COLUMNS", "")) or os.get_terminal_size().columns
    except (ValueError, OSError):
        return 80


def _definitions(rows: list[tuple[str, str]], width: int) -> list[str]:
    """A two-column list indented by 2: terms, then their text wrapped beside them."""
    first = min(max(len(term) for term, _ in rows), 30) + 2
    text_width = max(width - first - 2, 10)
    lines = []
    for term, text in rows:
        wrapped = textwrap.wrap(text, text_width) or [""]
        if len(term) <= first - 2:
            lines.append(f"  {term}".ljust(first + 2) + wrapped[0])
        else:
            lines += [f"  {term}", " " * (first + 2) + wrapped[0]]
        lines += [" " * (first + 2) + line for line in wrapped[1:]]
    return lines
