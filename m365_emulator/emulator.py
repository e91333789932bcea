"""``Emulator``: owns the tenants, the token service, both APIs, the counters and the HTTPS server thread."""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from m365_emulator.auth import TokenService, aad_error
from m365_emulator.config import AppRegistration, EmulatorConfig, FaultConfig, TenantSpec
from m365_emulator.exchange_api import ExchangeApi
from m365_emulator.feed_api import FeedApi
from m365_emulator.graph_api import GraphApi
from m365_emulator.ingestion import Visibility
from m365_emulator.server import TlsServer
from m365_emulator.state import FaultInjector, Stats
from m365_emulator.stream import RecordFilter, epoch, iter_matching
from m365_emulator.tls import make_server_tls, server_context
from m365_emulator.wire import Reply, Request, api_error

logger = logging.getLogger(__name__)


class Emulator:
    """A running (after ``start()``) Microsoft 365 audit API emulator. Prefer ``run_emulator(config)``.

    ``clock`` is the emulator's "now" (the UTC wall clock by default): it decides which records exist and have been
    ingested (late records, ``config.ingestion``). Tests move it, alone or together with the local host (a
    ``durable_local.clock.OffsetFileClock``'s ``now``); it may be replaced at any time (``emu.clock = ...``).
    """

    def __init__(self, config: EmulatorConfig, clock: Callable[[], datetime] | None = None) -> None:
        self.config = config
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))
        self._tenants: dict[str, TenantSpec] = {}
        self._aliases: dict[str, str] = {}
        for spec in config.tenants:
            self.add_tenant(spec)
        self.stats = Stats()
        self._injector = FaultInjector(config.faults)
        self._tokens = TokenService(config.token_lifetime_seconds)
        self._apps: dict[tuple[str, str], AppRegistration] = {}
        self.graph = GraphApi(self._tenants, config.graph, self._injector, self.stats, visibility=self._visibility)
        self.exchange = ExchangeApi(
            self._tenants, config.exchange, self._injector, self.stats, visibility=self._visibility
        )
        self.feed = FeedApi(self._tenants, config.feed, lambda: self.config.ingestion, self.now)
        """The Management Activity API: its subscriptions, blobs, ground truth (``feed.ground_truth_ids``), stats."""
        for app in config.apps:
            self.register_app(app)
        self._server: TlsServer | None = None
        self._thread: threading.Thread | None = None
        self._workdir: Path | None = None
        self.base_url = ""
        self.ca_bundle = ""

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self) -> Emulator:
        self._workdir = Path(tempfile.mkdtemp(prefix="m365-emulator-"))
        ca, cert, key = make_server_tls(self._workdir)
        self._server = TlsServer((self.config.host, self.config.port), server_context(cert, key), self)
        port = self._server.server_address[1]
        self.base_url = f"https://{self.config.host}:{port}"
        self.ca_bundle = str(ca)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="m365-emulator", daemon=True
        )
        self._thread.start()
        logger.info("m365 emulator serving on %s", self.base_url)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    @property
    def authority_host(self) -> str:
        return self.base_url

    @property
    def graph_base_url(self) -> str:
        return f"{self.base_url}/graph"

    @property
    def exchange_base_url(self) -> str:
        return f"{self.base_url}/exchange"

    @property
    def feed_base_url(self) -> str:
        """The Management Activity API's base (``manage.office.com``'s stand-in): ``{it}/api/v1.0/{tenant}/...``."""
        return f"{self.base_url}/manage"

    # -- knobs ----------------------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The emulator's "now" (``clock``), UTC."""
        return self.clock().astimezone(UTC)

    def _visibility(self) -> Visibility:
        """What a query or session created now can see: records created at least their ingestion delay ago."""
        return self.config.ingestion.snapshot(self.now().timestamp())

    @property
    def faults(self) -> FaultConfig:
        return self._injector.config

    @faults.setter
    def faults(self, value: FaultConfig) -> None:
        self._injector.reset(value)

    def add_tenant(self, spec: TenantSpec) -> None:
        self._tenants[spec.tenant_id] = spec
        self._aliases[spec.tenant_id.casefold()] = spec.tenant_id
        self._aliases[spec.domain.casefold()] = spec.tenant_id

    def register_app(self, app: AppRegistration) -> None:
        tenant_id = self.resolve_tenant(app.tenant_id)
        if tenant_id is None:
            raise ValueError(f"unknown tenant {app.tenant_id!r}: add a TenantSpec for it first")
        if app.client_secret is None and app.certificate_pem is None:
            raise ValueError("an app registration needs a client_secret or a certificate_pem")
        self._apps[(tenant_id, app.client_id.casefold())] = app
        self._tokens.register(app)

    def expire_tokens(self) -> None:
        """Invalidate every token issued so far; clients must get new ones."""
        self._tokens.expire_all()

    def resolve_tenant(self, segment: str) -> str | None:
        return self._aliases.get(segment.casefold())

    # -- ground truth ---------------------------------------------------------------------------------------------

    def ground_truth_records(
        self,
        tenant_id: str,
        start: datetime,
        end: datetime,
        *,
        record_types: Iterable[str] | None = None,
        operations: Iterable[str] | None = None,
        user_ids: Iterable[str] | None = None,
        ip_addresses: Iterable[str] | None = None,
        object_ids: Iterable[str] | None = None,
        administrative_unit_ids: Iterable[str] | None = None,
        keyword: str | None = None,
        services: Iterable[str] | None = None,
        visible_at: datetime | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every record with ``start <= createdDateTime < end`` that the filters select, in time order (Graph shape).

        ``visible_at``: only the records a query created at that moment would see (created and ingested by then);
        None: every record of the window, late or not (what a query returns once every delay has passed).
        """
        flt = RecordFilter.build(
            record_types=record_types,
            operations=operations,
            user_ids=user_ids,
            ip_addresses=ip_addresses,
            object_ids=object_ids,
            administrative_unit_ids=administrative_unit_ids,
            keyword=keyword,
            services=services,
        )
        if visible_at is not None:
            flt = replace(flt, visibility=self.config.ingestion.snapshot(epoch(visible_at)))
        spec = self._tenants[tenant_id]
        for record, _ in iter_matching(spec, epoch(start), epoch(end), flt):
            yield record.graph_record()

    def ground_truth_ids(self, tenant_id: str, start: datetime, end: datetime, **filters: Any) -> list[str]:
        """Ids of ``ground_truth_records`` (same keyword filters), in time order."""
        return [r["id"] for r in self.ground_truth_records(tenant_id, start, end, **filters)]

    def ingestion_delays(self, tenant_id: str, start: datetime, end: datetime) -> dict[str, float]:
        """Record id -> seconds from its creation until it is searchable (``config.ingestion``), in [start, end)."""
        delays = self.config.ingestion
        spec = self._tenants[tenant_id]
        return {r.id: delays.delay_seconds(r) for r, _ in iter_matching(spec, epoch(start), epoch(end), RecordFilter())}

    # -- request entry points (called by the server) --------------------------------------------------------------

    def openid_configuration(self, request: Request, segment: str) -> Reply:
        tenant_id = self.resolve_tenant(segment)
        if tenant_id is None:
            # The discovery endpoint names the error invalid_tenant (the token endpoint says invalid_request).
            return _unknown_tenant(segment, request.base_url, error="invalid_tenant")
        root = f"{request.base_url}/{tenant_id}"
        body = {
            "token_endpoint": f"{root}/oauth2/v2.0/token",
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "jwks_uri": f"{root}/discovery/v2.0/keys",
            "response_modes_supported": ["query", "fragment", "form_post"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "issuer": f"{root}/v2.0",
            "request_uri_parameter_supported": False,
            "authorization_endpoint": f"{root}/oauth2/v2.0/authorize",
            "device_authorization_endpoint": f"{root}/oauth2/v2.0/devicecode",
            "end_session_endpoint": f"{root}/oauth2/v2.0/logout",
            "tenant_region_scope": "WW",
            "cloud_instance_name": "m365-emulator",
        }
        return Reply(200, body)

    def token(self, request: Request, segment: str) -> Reply:
        tenant_id = self.resolve_tenant(segment)
        if tenant_id is None:
            return _unknown_tenant(segment, request.base_url)
        from urllib.parse import parse_qsl

        form = dict(parse_qsl(request.body.decode("utf-8", "replace"), keep_blank_values=True))
        # The assertion audience is the token endpoint the client was told about (GUID or domain form).
        endpoint = f"{request.base_url}/{segment}/oauth2/v2.0/token"
        reply = self._tokens.issue(tenant_id, form, endpoint, request.base_url)
        if reply.status == 200:
            with self.stats.lock:
                self.stats.tokens_issued += 1
        return reply

    def call_api(self, request: Request, api: str, audience: str, parts: list[str]) -> Reply:
        claims = self._tokens.check_bearer(request.headers.get("authorization"), audience)
        if isinstance(claims, str):
            self.stats.bump(self.stats.auth_failures, ("", api))
            return _unauthorized(claims, request)
        tenant_id = claims.tenant_id
        key = (tenant_id, api)
        self.stats.bump(self.stats.requests, key)
        app = self._apps.get((tenant_id, claims.client_id.casefold()))
        if api == "feed":
            denied = self.feed.authorize(request, tenant_id, claims.roles, parts)
        elif api == "exchange":
            if len(parts) != 4 or parts[:2] != ["adminapi", "beta"] or parts[3] != "InvokeCommand":
                return api_error(404, "NotFound", f"No endpoint for {request.path}.", request=request)
            if request.method != "POST":
                return api_error(405, "MethodNotAllowed", "InvokeCommand accepts POST only.", request=request)
            if self.resolve_tenant(parts[2]) != tenant_id:
                self.stats.bump(self.stats.auth_failures, key)
                return _unauthorized("The tenant in the request URL does not match the token's tenant.", request)
            has_role = app is not None and app.exchange_role
            denied = self.exchange.authorize(request, tenant_id, claims.roles, has_role, claims.client_id)
        else:
            denied = self.graph.authorize(request, claims.roles)
            if denied is None and request.method in self.faults.deny_graph_methods:
                denied = self.graph.authorize(request, ())
        if denied is not None:
            return denied
        fault = self._injector.draw(api)
        if fault is not None:
            return self._fault_reply(fault.status, fault.retry_after, fault.kind, key, request)
        if api == "feed":
            return self.feed.handle(request, tenant_id, parts)
        if api == "exchange":
            return self.exchange.handle(request, tenant_id)
        return self.graph.handle(request, tenant_id, parts, claims.roles)

    def _fault_reply(
        self, status: int, retry_after: int | None, kind: str, key: tuple[str, str], request: Request
    ) -> Reply:
        if kind == "403":
            self.stats.bump(self.stats.transient_403, key)
            return api_error(
                403, "Forbidden", "The request is temporarily forbidden. Retry the request.", request=request
            )
        if kind == "429":
            self.stats.bump(self.stats.throttled_429, key)
            wait = retry_after if retry_after is not None else 1
            message = f"Too many requests. The request was throttled; please retry after {wait} seconds."
            return api_error(429, "TooManyRequests", message, retry_after=retry_after, request=request)
        self.stats.bump(self.stats.injected_5xx, key)
        code = "ServiceUnavailable" if status == 503 else "GatewayTimeout"
        return api_error(
            status, code, "The service is temporarily unavailable.", retry_after=retry_after, request=request
        )


def _unknown_tenant(segment: str, base_url: str, *, error: str = "invalid_request") -> Reply:
    text = (
        f"Tenant '{segment}' not found. Check to make sure you have the correct tenant ID and are signing into the "
        "correct cloud."
    )
    return aad_error(400, error, 90002, text, base_url)


def _unauthorized(reason: str, request: Request) -> Reply:
    reply = api_error(401, "InvalidAuthenticationToken", reason, request=request)
    challenge = (
        f'Bearer realm="", authorization_uri="{request.base_url}/common/oauth2/authorize", error="invalid_token"'
    )
    return Reply(reply.status, reply.body, (*reply.headers, ("WWW-Authenticate", challenge)))


@contextmanager
def run_emulator(
    config: EmulatorConfig | None = None, *, clock: Callable[[], datetime] | None = None
) -> Iterator[Emulator]:
    """Start an emulator on 127.0.0.1 (ephemeral port unless configured) and stop it on exit."""
    emulator = Emulator(config or EmulatorConfig(), clock).start()
    try:
        yield emulator
    finally:
        emulator.stop()
