"""A real HTTP server on loopback whose answers a test scripts, for unit tests of the HTTP policy and paging.

The handler is a plain function of the recorded request, so a test states exactly what the "API" answers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None


Handler = Callable[[Recorded], Reply]


@dataclass
class ScriptedServer:
    base_url: str
    requests: list[Recorded]


def replies(*items: Reply) -> Handler:
    """A handler answering each request with the next reply; the last one repeats."""
    queue = list(items)

    def handle(_: Recorded) -> Reply:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return handle


@contextmanager
def scripted_server(handler: Handler) -> Iterator[ScriptedServer]:
    recorded: list[Recorded] = []
    lock = threading.Lock()

    class _Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            payload = self.rfile.read(length) if length else b""
            body = json.loads(payload) if payload else None
            request = Recorded(self.command, self.path, {k: v for k, v in self.headers.items()}, body)
            with lock:
                recorded.append(request)
                reply = handler(request)
            data = reply.raw if reply.raw is not None else b""
            if reply.raw is None and reply.body is not None:
                data = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield ScriptedServer(f"http://127.0.0.1:{server.server_address[1]}", recorded)
    finally:
        server.shutdown()
        server.server_close()


class FakeTokens:
    """Token provider fake: counts sign-ins and invalidations (the retry policy is under test, not msal)."""

    SECRET_TOKEN = "tok-SECRET-VALUE"

    def __init__(self) -> None:
        self.issued = 0
        self.invalidated = 0

    def get_token(self, scope: str) -> str:
        self.issued += 1
        return f"{self.SECRET_TOKEN}-{self.issued}"

    def invalidate(self, scope: str) -> None:
        self.invalidated += 1
