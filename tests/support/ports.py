"""Loopback ports for the servers tests start, safe with parallel test workers (pytest-xdist).

A port picked by binding port 0 and closing the socket is free only at that moment: another worker's host, emulator or
Azurite may bind it before the server this test starts does, and the test then talks to the wrong server. So a local
host is started with ``--port 0`` and binds a free port itself; its banner says which (``banner_base_url``).
``free_port`` stays for servers that cannot do that, and for a port a test wants closed.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

BANNER = re.compile(rb"^Listening on (http://\S+) ", re.MULTILINE)
"""The local host's first line (``durable_local.cli.print_banner``), printed once it listens."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def banner_base_url(log_path: Path) -> str | None:
    """The base URL a local host's log says it listens on, or None before it says so."""
    try:
        found = BANNER.search(log_path.read_bytes())
    except OSError:
        return None
    return found.group(1).decode() if found else None
