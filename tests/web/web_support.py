"""Helpers of the web component's tests (a module of its own: every test folder has a
`conftest`, so importing from one by name is ambiguous)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from typer.testing import Result

EXAMPLES = Path(__file__).parents[2] / "examples"
# `await dxts("show", wg)`: one command line, run against the services under test.
Dxts = Callable[..., Awaitable[Result]]
# `await browser(token)`: an HTTP client signed in with `token`.
Browser = Callable[[str], Awaitable[httpx.AsyncClient]]
# The example production's members and their feeder edges.
STEPS = {"Simulation", "Reconstruction", "Merge", "DatasetReplication"}
EDGES = {
    ("Simulation", "Reconstruction"),
    ("Reconstruction", "Merge"),
    ("Merge", "DatasetReplication"),
}
