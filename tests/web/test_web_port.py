"""`dxts up` serves the web view on the same port across restarts of one data directory (open
tabs and bookmarks keep working): recorded in `web-port`, chosen with --web-port, and a free one
when the recorded port is taken now."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from dxts.cli.up import WEB_PORT_FILE, Ports, Stack, serve_web


def port_of(url: str) -> int:
    return int(url.rpartition(":")[2])


async def test_the_web_port_is_kept_across_restarts(stack: Stack, tmp_path: Path) -> None:
    first = await serve_web(stack, Ports(), tmp_path)
    port = port_of(first.url)
    await first.stop()
    assert (tmp_path / WEB_PORT_FILE).read_text().strip() == str(port)

    again = await serve_web(stack, Ports(), tmp_path)
    try:
        assert port_of(again.url) == port
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{again.url}/healthz")).text == "ok"
    finally:
        await again.stop()

    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", port))
        taken.listen()
        elsewhere = await serve_web(stack, Ports(), tmp_path)
        await elsewhere.stop()
    moved = port_of(elsewhere.url)
    assert moved != port and (tmp_path / WEB_PORT_FILE).read_text().strip() == str(moved)

    with socket.socket() as probe:  # a port free now, asked for by --web-port
        probe.bind(("127.0.0.1", 0))
        chosen = probe.getsockname()[1]
    asked = await serve_web(stack, Ports(web=chosen), tmp_path)
    await asked.stop()
    assert port_of(asked.url) == chosen
    assert (tmp_path / WEB_PORT_FILE).read_text().strip() == str(chosen)
