"""``bench/follow_cost.py``'s wait for an idle follower ends when a window boundary passed while it waited.

The bench's clock is the wall clock plus an offset, so real time runs on while the follower works: a window that
closes meanwhile is covered too, and the covered end is then past the frontier the bench computed before.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench import follow_cost
from shared.models import iso
from tests.e2e.harness import Host

FRONTIER = datetime(2024, 6, 3, 12, 0, tzinfo=UTC)


@pytest.fixture
def follower_api() -> Iterator[tuple[Host, dict[str, object]]]:
    """A follows API whose answer the test sets."""
    answer: dict[str, object] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Host(f"http://127.0.0.1:{server.server_address[1]}", Path("."), Path("host.log")), answer
    finally:
        server.shutdown()


def test_a_follower_that_covered_one_window_more_is_idle(follower_api: tuple[Host, dict[str, object]]) -> None:
    host, answer = follower_api
    answer.update({"covered": {"end": iso(FRONTIER + timedelta(minutes=15))}, "running": None})
    found = follow_cost.idle(host, "f", FRONTIER, limit=3.0)
    assert found["covered"]["end"] == iso(FRONTIER + timedelta(minutes=15))


def test_a_follower_short_of_the_frontier_or_running_is_not(follower_api: tuple[Host, dict[str, object]]) -> None:
    host, answer = follower_api
    for covered, running in ((FRONTIER - timedelta(minutes=15), None), (FRONTIER, {"day": "x"})):
        answer.update({"covered": {"end": iso(covered)}, "running": running})
        with pytest.raises(SystemExit, match="never caught up"):
            follow_cost.idle(host, "f", FRONTIER, limit=0.5)
