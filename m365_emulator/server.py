"""The HTTPS server: routing of identity, Graph and Exchange endpoints on one loopback port."""

from __future__ import annotations

import json
import logging
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from m365_emulator.config import EXCHANGE_SCOPE_RESOURCE, GRAPH_SCOPE_RESOURCE, MANAGE_SCOPE_RESOURCE
from m365_emulator.wire import Reply, Request, api_error

_orjson: Any
try:  # serialising record pages is most of the emulator's work; orjson does it ~10x faster than json
    import orjson as _orjson
except ImportError:  # pragma: no cover - requirements.txt installs it
    _orjson = None

logger = logging.getLogger(__name__)
_JSON = "application/json; charset=utf-8"
_ODATA = "application/json;odata.metadata=minimal;odata.streaming=true;IEEE754Compatible=false;charset=utf-8"


class Emulator(Protocol):
    """What the server calls on the emulator (``m365_emulator.emulator.Emulator``), which owns the server."""

    base_url: str

    def call_api(self, request: Request, api: str, audience: str, parts: list[str]) -> Reply: ...

    def openid_configuration(self, request: Request, segment: str) -> Reply: ...

    def token(self, request: Request, segment: str) -> Reply: ...


class TlsServer(ThreadingHTTPServer):
    """One thread per connection; the TLS handshake runs in that thread, so a slow client never blocks accept()."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], context: ssl.SSLContext, emulator: Emulator) -> None:
        self.context = context
        self.emulator = emulator
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[Any, Any]:
        raw, address = self.socket.accept()
        return self.context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("connection from %s ended with an error", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: without this each reply waits ~40 ms
    server_version = "m365-emulator/1.0"
    timeout = 60
    server: TlsServer

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.client_address[0], *args)

    def _serve(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            split = urlsplit(self.path)
            host = self.headers.get("Host") or self.server.emulator.base_url.removeprefix("https://")
            request = Request(
                method=self.command,
                path=unquote(split.path),
                query=dict(parse_qsl(split.query, keep_blank_values=True)),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                base_url=f"https://{host}",
            )
            try:
                reply, content_type = route(self.server.emulator, request)
            except Exception:
                logger.exception("handler failed for %s %s", self.command, split.path)
                reply, content_type = api_error(500, "InternalServerError", "The emulator failed."), _JSON
            payload = reply.raw if reply.raw is not None else b"" if reply.body is None else encode_body(reply.body)
            self.send_response(reply.status)
            for name, value in reply.headers:
                self.send_header(name, value)
            if payload and not any(name.lower() == "content-type" for name, _ in reply.headers):
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (TimeoutError, ConnectionError, ssl.SSLError):
            self.close_connection = True

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _serve  # noqa: N815 - names the base class looks up


def encode_body(body: Any) -> bytes:
    """A reply body as compact JSON in UTF-8 (as Graph and Exchange send it)."""
    if _orjson is not None:
        try:
            return bytes(_orjson.dumps(body))
        except TypeError:
            pass  # a value orjson does not write (an integer beyond 64 bits): json writes it
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def route(emu: Emulator, request: Request) -> tuple[Reply, str]:
    """Pick the endpoint for a request; returns the reply and its content type."""
    parts = [p for p in request.path.split("/") if p]
    if parts[:1] == ["graph"]:
        return emu.call_api(request, "graph", GRAPH_SCOPE_RESOURCE, parts[1:]), _ODATA
    if parts[:1] == ["exchange"]:
        return emu.call_api(request, "exchange", EXCHANGE_SCOPE_RESOURCE, parts[1:]), _ODATA
    if parts[:1] == ["manage"]:
        return emu.call_api(request, "feed", MANAGE_SCOPE_RESOURCE, parts[1:]), _JSON
    if parts[:3] == ["common", "discovery", "instance"]:
        return _instance_discovery(request), _JSON
    if len(parts) >= 2:
        tenant_segment, rest = parts[0], parts[1:]
        if rest in (["v2.0", ".well-known", "openid-configuration"], [".well-known", "openid-configuration"]):
            return emu.openid_configuration(request, tenant_segment), _JSON
        if rest == ["oauth2", "v2.0", "token"] and request.method == "POST":
            return emu.token(request, tenant_segment), _JSON
        if rest == ["discovery", "v2.0", "keys"]:
            return Reply(200, {"keys": []}), _JSON
    return api_error(404, "NotFound", f"No endpoint for {request.method} {request.path}."), _JSON


def _instance_discovery(request: Request) -> Reply:
    """``/common/discovery/instance`` — lets msal validate this host when given it as ``instance_discovery``."""
    endpoint = request.query.get("authorization_endpoint", "")
    split = urlsplit(endpoint)
    segments = [p for p in split.path.split("/") if p]
    if split.scheme != "https" or not segments:
        return Reply(
            400, {"error": "invalid_instance", "error_description": "AADSTS50049: Unknown or invalid instance."}
        )
    # msal sends the authority's host without its port, so answer with the address this request reached.
    host = request.base_url.removeprefix("https://")
    body = {
        "tenant_discovery_endpoint": f"{request.base_url}/{segments[0]}/v2.0/.well-known/openid-configuration",
        "api-version": "1.1",
        "metadata": [{"preferred_network": host, "preferred_cache": host, "aliases": [host]}],
    }
    return Reply(200, body)
