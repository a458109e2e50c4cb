"""Ports chosen for components that name each other before any is served."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from dxts.core.grpc import ports


def _listen(port: int) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()


def test_a_port_below_the_ephemeral_range_that_is_free(tmp_path: Path) -> None:
    """Outgoing connections take their local ports from the ephemeral range: a port chosen
    there could be taken between the choice and the server's bind, one below it cannot."""
    low = ports._ephemeral_low()
    if low is None:
        pytest.skip("this system does not say where its ephemeral range is")
    chosen = {ports.free_port() for _ in range(20)}
    assert all(ports.LOWEST <= port < low for port in chosen)
    assert len(chosen) > 1  # chosen at random: two components do not race for one port
    for port in chosen:
        _listen(port)


def test_a_taken_port_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    if ports._ephemeral_low() is None:
        pytest.skip("this system does not say where its ephemeral range is")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports.free_port()))
        taken.listen()
        busy = taken.getsockname()[1]
        spare = _unused_port()
        # The random order tries the busy port first.
        monkeypatch.setattr(ports.random, "sample", lambda population, k: [busy, spare])
        assert ports.free_port() == spare


def test_a_port_just_chosen_is_not_chosen_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ports chosen together are all free until the first is bound: the same one must not
    come out twice."""
    if ports._ephemeral_low() is None:
        pytest.skip("this system does not say where its ephemeral range is")
    first = _unused_port()
    other = _unused_port(besides=first)
    monkeypatch.setattr(ports.random, "sample", lambda population, k: [first, other])
    assert ports.free_port() == first
    assert ports.free_port() == other  # `first` is still free, but already handed out


def _unused_port(besides: int = 0) -> int:
    """A free port this process's `free_port` has not handed out (nor `besides`)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port not in ports._chosen and port != besides:
            return port


def test_without_the_range_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", Path("/nonexistent/ip_local_port_range"))
    port = ports.free_port()
    assert 0 < port < 65536
    _listen(port)
