"""A listening port chosen before the server that will use it exists.

The components of one process name each other when they are built (definition forwards to
execution, which reads definition), so their ports are chosen before any is served. A port the
kernel hands out for `bind(host, 0)` comes from the ephemeral range, from which it also takes
the local port of every outgoing connection (to the database, to an adaptor): between the
choice and the server's bind, such a connection can take it, and the server then fails to
start. So the port is chosen below the ephemeral range, where the kernel allocates nothing by
itself, and checked free there. Nor is a port handed out again while it is among the last
`REMEMBERED` this process chose: ports chosen together (a cluster's components, each with its
metrics port) are checked free before any of them is bound, so the same free port could
otherwise be chosen twice.
"""

from __future__ import annotations

import random
import socket
from collections import deque
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000  # below this live well-known services' conventional ports
ATTEMPTS = 200
REMEMBERED = 1_000
_chosen: deque[int] = deque(maxlen=REMEMBERED)


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` nothing listens on now, outside the kernel's ephemeral range when
    the system says where that is (the ephemeral way otherwise)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    below = _ephemeral_low()
    if below is not None and below > LOWEST:
        for port in random.sample(range(LOWEST, below), min(ATTEMPTS, below - LOWEST)):
            if port not in _chosen and _bindable(family, host, port):
                _chosen.append(port)
                return port
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        chosen: int = probe.getsockname()[1]
        return chosen


def _ephemeral_low() -> int | None:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bindable(family: socket.AddressFamily, host: str, port: int) -> bool:
    with socket.socket(family) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True
