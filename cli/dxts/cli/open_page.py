"""`dxts open WG|TF`: the web page of a workgraph or a member, with a one-time sign-in.

The name is resolved first, by the service that holds it (a handle `wg-42`, `wg-42/Reco`, an id
or WG/STEP, as every verb takes): a name that stands for nothing fails here, in one line and with
a non-zero status, rather than as a page saying so after the sign-in.

The web view (dxts-web, which `dxts up` serves) hands out a one-time sign-in link to whoever
presents a token the services accept; this command asks for one with the token the other
commands use, and prints the page's URL behind it — so `chromium "$(dxts open WG)"` shows the
page signed in, and the token itself never appears in a URL or a browser history.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
import webbrowser
from typing import Annotated
from urllib.parse import quote

import typer

from dxts.cli.client import EXIT_FAILED, Clients, connection_of, fail_line, run
from dxts.cli.names import entity

REQUEST_TIMEOUT_S = 10


def _sign_in_path(web: str, token: str) -> str:
    request = urllib.request.Request(
        f"{web}/api/sign-in-links",
        method="POST",
        headers={"Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as reply:
            return str(json.loads(reply.read())["path"])
    except urllib.error.HTTPError as error:
        try:
            reason = json.loads(error.read()).get("error", error.reason)
        except ValueError:
            reason = error.reason
        raise RuntimeError(f"the web view refused the token: {reason}") from None
    except (urllib.error.URLError, OSError) as error:
        raise RuntimeError(f"cannot reach the web view at {web}: {error}") from None


def _browser_at_hand() -> bool:
    """A browser can show the page here: an interactive terminal (not `$(dxts open WG)`, whose
    caller uses the one-time link itself) with a display to open it on."""
    display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return sys.stdout.isatty() and (display or sys.platform in ("darwin", "win32"))


def open_page(
    ctx: typer.Context,
    identifier: Annotated[
        str,
        typer.Argument(
            metavar="WG|TF", help="A workgraph or a member: its handle (wg-42, wg-42/Reco), id."
        ),
    ],
    browser: Annotated[bool, typer.Option(help="Open it in a browser when one is at hand.")] = True,
) -> None:
    """Print (and open, where a browser is at hand) the web page of a workgraph or a member,
    behind a one-time sign-in link for your token."""
    connection = connection_of(ctx)
    if not connection.web or not connection.token:
        fail_line("error: no web view known: start `dxts up`, or set DXTS_WEB_URL and DXTS_TOKEN")
        raise typer.Exit(EXIT_FAILED)

    async def body(clients: Clients) -> str:
        return (await entity(clients, identifier))[1]

    found = run(ctx, body)  # before the one-time link: a name naming nothing fails here
    web = connection.web.rstrip("/")
    try:
        path = _sign_in_path(web, connection.token)
    except RuntimeError as error:
        fail_line(f"error: {error}")
        raise typer.Exit(EXIT_FAILED) from None
    url = f"{web}{path}?next={quote('/open/' + quote(found, safe=''), safe='')}"
    typer.echo(url)
    if browser and _browser_at_hand():
        webbrowser.open(url)
