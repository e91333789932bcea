"""One HTTP session per audit client, with bounded tenacity retries and error mapping to ``shared.errors``.

Retry policy (per call):

* 408, 429, every 5xx but 501 and 505 (gateways answer codes of their own, often with an HTML page, whose title
  becomes the message), connection errors and timeouts are retried up to ``max_attempts`` in all. The wait is the
  server's ``Retry-After``
  (seconds or an HTTP date) when given, else exponential back-off with jitter (a 429 that names no wait: our own
  back-off from ``THROTTLE_WAIT_SECONDS``); all are capped at ``max_retry_wait_seconds`` and multiplied by
  ``retry_wait_scale`` (tests use a tiny scale or a fake sleep). A call still answered 429 after its last attempt
  raises a :class:`TransientApiError` whose message begins ``throttled (429)``: the window waits and retries the step
  without spending one of the chunk's attempts.
* A Graph 400 ``UnknownError`` that is not auditing turned off is transient (retried, as CIPP-API does); a create
  answered so may have created its query, so ``recover`` looks for it before it is sent again.
* 403 is retried ``transient_403_attempts`` times (Purview answers transient 403s) unless the body says it is a
  permanent permission problem, which raises :class:`MissingPermissionError` at once.
* 401 drops the cached token and retries once with a fresh one; a second 401 raises :class:`AuthenticationError`.
* Other 4xx raise :class:`PermanentApiError` with the server's error code and message.
* Whatever the status, the body decides first when it names the problem (:mod:`shared.audit.error_body`, which reads
  ``error.details[]`` and ``innererror.internalException`` too): auditing turned off in the tenant raises
  :class:`AuditingDisabledError`, a missing permission or role :class:`MissingPermissionError`, a refused routing
  hint :class:`RoutingError`; throttling text is retried.

A call whose outcome is unknown (a 5xx, a timeout, a dropped connection, a 2xx body that does not parse) may have
been applied. It is sent again only when that is harmless: a ``recover`` callback says what the lost answer was,
and a call made with ``resend_if_ambiguous=False`` (one that advances server-side state) raises
:class:`AmbiguousResponseError` instead, so its caller can start over safely.

After the last attempt :class:`TransientApiError` carries the last ``Retry-After``. Request headers (the bearer token)
never appear in logs or messages.
"""

from __future__ import annotations

import email.utils
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import requests
import tenacity

from shared.audit.auth import TokenProvider
from shared.audit.config import AuditApiConfig
from shared.audit.error_body import THROTTLED, ErrorBody, Problem, classify, parse_error_body
from shared.audit.session import PinnedSession, tls_config_error
from shared.budget.slot_deadline import check_request
from shared.errors import (
    AuditingDisabledError,
    AuthenticationError,
    CollectorError,
    MissingPermissionError,
    PermanentApiError,
    RoutingError,
    TransientApiError,
)
from shared.log_fields import log_event
from shared.records.json_codec import loads as json_loads

logger = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""Retried whatever the body says; so is every other 5xx but 501 and 505 (gateways answer 5xx codes of their own,
often with an HTML page: CIPP-API retries 5xx and gateway errors alike; "not implemented" stays so)."""
_PERMANENT_5XX = frozenset({501, 505})
THROTTLE_WAIT_SECONDS = 5.0
"""The first wait after a 429 that names no wait (no ``Retry-After``, nothing in the body): a back-off of our own,
doubling from here (capped like every wait), instead of the 1 s a transient failure waits first."""
_MAX_PAGE = 4000
_BODY_WAIT_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:seconds?|secs?|s)\b", re.IGNORECASE)


class _RetryableError(TransientApiError):
    """Internal marker: this attempt failed in a way worth another attempt."""


class AmbiguousResponseError(TransientApiError):
    """A call that must not be sent twice may or may not have been applied (``resend_if_ambiguous=False``)."""


ErrorReader = Callable[[int, ErrorBody], Problem | CollectorError | None]
"""An API's own reading of an error answer (status, body): a problem class (``Problem.TRANSIENT`` retries it), a
permanent error to raise as it is, or None to let the body's markers and the status decide (the Management Activity
API's ``AF…`` codes)."""


@dataclass(frozen=True)
class JsonAnswer:
    """A 2xx answer of :meth:`AuditHttpClient.request_value`: any JSON value (None for no body) and the headers."""

    body: Any
    headers: Mapping[str, str]


@dataclass
class _Call:
    """One logical API call across its attempts."""

    method: str
    url: str
    json_body: Any
    params: Mapping[str, str] | None
    headers: dict[str, str]
    not_found_ok: bool
    forbidden_seen: int = 0
    recover: Callable[[], dict[str, Any] | None] | None = None
    resend_if_ambiguous: bool = True
    failed_if: Callable[[dict[str, Any]], str | None] | None = None
    any_json: bool = False
    """A 2xx body may be any JSON value (an array), not only an object."""
    read_error: ErrorReader | None = None
    split: Callable[[bytes], Any] | None = None
    """Reads a 2xx body's bytes itself (a records page split into records) instead of decoding them."""
    headers_seen: Mapping[str, str] | None = None
    """The 2xx answer's headers (set by ``_interpret``)."""
    ambiguous: bool = False
    """The last attempt may have been applied by the server (5xx or no answer): call ``recover`` before resending."""


@dataclass(frozen=True)
class ApiIdentity:
    """Which API a client talks to: its token scope, the permission a permanent 403 names, and what to do about a
    refused routing hint."""

    name: str
    scope: str
    permission: str
    routing_fix: str = ""


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value (delta-seconds or HTTP date); None when absent/invalid."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def json_body(response: requests.Response) -> Any:
    """A 2xx body's JSON, decoded once from its bytes (``shared.records.json_codec``: orjson when it reads the same
    value).

    A body that declares a charset other than UTF-8 (JSON between systems is UTF-8, RFC 8259 section 8.1) or no JSON
    content type is decoded by ``requests`` as before.

    Raises:
        ValueError: the body is not JSON.
    """
    if not _utf8(response):
        return response.json()
    return json_loads(response.content)


def _utf8(response: requests.Response) -> bool:
    return (response.encoding or "").lower().replace("_", "-") in ("utf-8", "utf8")


def _error_body(response: requests.Response) -> ErrorBody:
    """The error body's parts (see ``shared.audit.error_body``); the reason phrase when it is not JSON."""
    try:
        body = response.json()
    except ValueError:
        body = None
    return parse_error_body(body, (response.text or response.reason or "")[:_MAX_PAGE])


class AuditHttpClient:
    """Authenticated JSON calls to one audit API with the retry policy above.

    Args:
        config: adapter settings (timeouts, attempts, caps).
        tokens: bearer-token source (msal in production).
        api: scope and permission name of the API.
        sleep: how to wait between attempts (a fake in tests).
        clock: current UTC time, for ``Retry-After`` HTTP dates.
        retry_wait_scale: multiplies every wait (tests use e.g. 0.001).
        session: a ``requests.Session`` to use (one per client by default).
    """

    def __init__(
        self,
        config: AuditApiConfig,
        tokens: TokenProvider,
        api: ApiIdentity,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        retry_wait_scale: float = 1.0,
        session: requests.Session | None = None,
    ) -> None:
        self._config = config
        self._tokens = tokens
        self._api = api
        self._sleep = sleep
        self._clock = clock
        self._scale = retry_wait_scale
        self._session = session or PinnedSession(verify=config.ca_bundle if config.ca_bundle else True)
        self._backoff = tenacity.wait_exponential_jitter(initial=1.0, max=config.max_retry_wait_seconds)

    def close(self) -> None:
        self._session.close()

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        server_wait = exc.retry_after if isinstance(exc, TransientApiError) else None
        seconds = server_wait if server_wait is not None else self._backoff(state)
        if server_wait is None and isinstance(exc, TransientApiError) and exc.status == 429:
            seconds = max(seconds, THROTTLE_WAIT_SECONDS * 2 ** (state.attempt_number - 1))  # our own back-off
        seconds = min(seconds, self._config.max_retry_wait_seconds) * self._scale
        if isinstance(exc, TransientApiError) and exc.status == 429:
            log_event(
                logger,
                logging.WARNING,
                "api.throttled",
                f"{self._api.name} throttled (429), attempt {state.attempt_number}; retrying in {seconds:.3f}s",
                tenantId=self._config.tenant_id,
                api=self._api.name,
                status=429,
                attempt=state.attempt_number,
                retryAfterSeconds=server_wait,
                waitSeconds=round(seconds, 3),
            )
            return seconds
        logger.info(
            "%s call attempt %d failed (%s); retrying in %.3fs", self._api.name, state.attempt_number, exc, seconds
        )
        return seconds

    def request_json(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        not_found_ok: bool = False,
        recover: Callable[[], dict[str, Any] | None] | None = None,
        resend_if_ambiguous: bool = True,
        failed_if: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> dict[str, Any] | None:
        """Sends the call, retrying per policy; returns the JSON object (None for 204, or 404 when allowed).

        Args:
            recover: for calls that are not idempotent (a create): after an attempt whose outcome is unknown (5xx,
                timeout, dropped connection, unreadable body) it is called before sending again; a non-None result
                is what the lost response would have said, and is returned instead of resending.
            resend_if_ambiguous: False for a call that advances server-side state (the first call of an Exchange
                search block): an unknown outcome raises :class:`AmbiguousResponseError` instead of a resend.
            failed_if: reads a 2xx body and names why it is a failure in disguise (Exchange: a 200 whose warnings
                say the cmdlet was cancelled), or None. Such an answer is an unknown outcome: retried like a 5xx.
        """
        call = _Call(
            method,
            url,
            json_body,
            params,
            dict(headers or {}),
            not_found_ok,
            recover=recover,
            resend_if_ambiguous=resend_if_ambiguous,
            failed_if=failed_if,
        )
        result = self._run(call)
        return result if isinstance(result, dict) else None

    def request_value(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        read_error: ErrorReader | None = None,
    ) -> JsonAnswer:
        """A call (safe to send again) whose 2xx body may be any JSON value, answered with its headers; same retry
        policy as :meth:`request_json`. ``read_error`` reads an error answer first (an API's own error codes)."""
        call = _Call(method, url, None, params, {}, False, any_json=True, read_error=read_error)
        body = self._run(call)
        return JsonAnswer(body, call.headers_seen or {})

    def request_page(self, url: str, *, split: Callable[[bytes], Any], params: Mapping[str, str] | None = None) -> Any:
        """A GET (safe to send again) whose 2xx body ``split`` reads from its UTF-8 bytes; a body in another declared
        charset is decoded as :meth:`request_json` decodes it and handed over decoded (None: no body). A ``ValueError``
        from ``split`` is an unreadable body (sent again); same retry policy as :meth:`request_json`."""
        call = _Call("GET", url, None, params, {}, False, split=split)
        return self._run(call)

    def _run(self, call: _Call) -> Any:
        method = call.method
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._config.max_attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception_type(_RetryableError),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(self._attempt, call)
        except _RetryableError as exc:
            # A 429 to the end is the service being busy, not failing: the window retries it without an attempt.
            busy = f"{THROTTLED}: " if exc.status == 429 else ""
            raise TransientApiError(
                f"{busy}{self._api.name} {method} gave up after {self._config.max_attempts} attempts: {exc}",
                status=exc.status,
                retry_after=exc.retry_after,
            ) from None

    def _send(self, call: _Call) -> requests.Response:
        token = self._tokens.get_token(self._api.scope)
        # The lane's tenant budget slot must still be held (inside an activity's SlotDeadline.guarding only).
        check_request(f"{self._api.name} {call.method}", advances_session=not call.resend_if_ambiguous)
        headers = {"Accept": "application/json", **call.headers, "Authorization": f"Bearer {token}"}
        try:
            return self._session.request(
                call.method,
                call.url,
                json=call.json_body,
                params=call.params,
                headers=headers,
                timeout=self._config.http_timeout_seconds,
            )
        except requests.exceptions.SSLError:
            raise tls_config_error(urlsplit(call.url).netloc) from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            call.ambiguous = True
            raise _RetryableError(f"{type(exc).__name__} calling {self._api.name}") from None

    def _attempt(self, call: _Call) -> Any:
        if call.ambiguous and call.recover is not None:
            found = call.recover()
            if found is not None:
                logger.info(
                    "%s %s: the earlier attempt had been applied; reusing its result", self._api.name, call.method
                )
                return found
        call.ambiguous = False
        try:
            try:
                response = self._send(call)
            except _RetryableError as exc:
                raise self._unless_unsafe(call, exc) from None
            if response.status_code == 401:
                # The token may have expired or been revoked early: sign in again once, then give up.
                self._tokens.invalidate(self._api.scope)
                response = self._send(call)
                if response.status_code == 401:
                    body = _error_body(response)
                    if self._problem(call, 401, body) is Problem.PERMISSION:
                        raise self._missing_permission(body, 401)
                    raise AuthenticationError(
                        f"{self._api.name} rejected a fresh token (401 {body.code} {body.message}); check client_id, "
                        "tenant_id and the app's credentials",
                        status=401,
                    )
        except TransientApiError as exc:
            if isinstance(exc, _RetryableError | AmbiguousResponseError):
                raise
            raise _RetryableError(str(exc), status=exc.status, retry_after=exc.retry_after) from None
        return self._interpret(response, call)

    def _unless_unsafe(self, call: _Call, exc: _RetryableError) -> TransientApiError:
        """A retryable failure, or :class:`AmbiguousResponseError` when the call may have been applied and must
        not be sent again."""
        if call.ambiguous and not call.resend_if_ambiguous:
            return AmbiguousResponseError(
                f"{exc} (the call may have been applied; not sent again)",
                status=exc.status,
                retry_after=exc.retry_after,
            )
        return exc

    @staticmethod
    def _problem(call: _Call, status: int, body: ErrorBody) -> Problem | None:
        """What kind of problem an error answer is: the call's own reader first (it may raise), then the markers
        (not for a 429, which is throttling whatever it says)."""
        read = call.read_error(status, body) if call.read_error is not None else None
        if isinstance(read, CollectorError):
            raise read
        if read is not None:
            return read
        return classify(body) if status != 429 else None

    def _missing_permission(self, body: ErrorBody, status: int) -> MissingPermissionError:
        return MissingPermissionError(
            f"{self._api.name} denied access ({body.code or status}: {body.message}): the app needs "
            f"{self._api.permission}",
            permission=self._api.permission,
            status=status,
        )

    def _interpret(self, response: requests.Response, call: _Call) -> Any:
        method = call.method
        status = response.status_code
        if 200 <= status < 300:
            if status == 204 or not response.content:
                return None
            try:
                split = call.split if _utf8(response) else None
                body = split(response.content) if split is not None else json_body(response)
            except ValueError:
                # A truncated or garbled body is read again from the same link, unless reading it was the change.
                call.ambiguous = True
                error = _RetryableError(f"{self._api.name} returned an unreadable JSON body", status=status)
                raise self._unless_unsafe(call, error) from None
            call.headers_seen = response.headers
            if not isinstance(body, dict) and not call.any_json and call.split is None:
                call.ambiguous = True
                error = _RetryableError(f"{self._api.name} returned JSON that is not an object", status=status)
                raise self._unless_unsafe(call, error)
            failed = call.failed_if(body) if call.failed_if is not None and isinstance(body, dict) else None
            if failed is not None:
                call.ambiguous = True  # the work may have been done (or partly): only a safe call is sent again
                raise self._unless_unsafe(call, _RetryableError(f"{self._api.name}: {failed}", status=status))
            return body
        error_body = _error_body(response)
        detail = f"{status} {error_body.code}: {error_body.message}".strip()
        if status == 404 and call.not_found_ok:
            return None
        problem = self._problem(call, status, error_body)
        if problem is Problem.AUDITING_DISABLED:
            raise AuditingDisabledError(
                f"{self._api.name} {method} refused: unified auditing is turned off in the tenant ({detail})",
                status=status,
            )
        if problem is Problem.ROUTING:
            raise RoutingError(
                f"{self._api.name} could not route the call ({detail}); {self._api.routing_fix}".rstrip("; "),
                status=status,
            )
        if problem is Problem.PERMISSION:
            raise self._missing_permission(error_body, status)
        if (
            status in RETRYABLE_STATUSES
            or (status >= 500 and status not in _PERMANENT_5XX)
            or problem is Problem.TRANSIENT
        ):
            # A 429 or a throttling 4xx was refused before any work; a 5xx may not have been, nor an "UnknownError"
            # (a create answered so may have created its query: ``recover`` looks before sending it again).
            call.ambiguous = status >= 500 or error_body.code == "UnknownError"
            retry_after = parse_retry_after(response.headers.get("Retry-After"), now=self._clock())
            if retry_after is None and status == 429:
                match = _BODY_WAIT_RE.search(error_body.message)  # Exchange puts the wait at the end of its 429
                retry_after = float(match.group(1)) if match else None
            error = _RetryableError(f"{self._api.name} {method} {detail}", status=status, retry_after=retry_after)
            raise self._unless_unsafe(call, error)
        if status == 403:
            call.forbidden_seen += 1
            if call.forbidden_seen > self._config.transient_403_attempts:
                raise TransientApiError(
                    f"{self._api.name} {method} kept answering {detail} after {call.forbidden_seen} tries; "
                    f"if it persists, check that the app has {self._api.permission}",
                    status=403,
                )
            raise _RetryableError(f"{self._api.name} {method} {detail}", status=403)
        raise PermanentApiError(f"{self._api.name} {method} failed: {detail}", status=status)


def http_client_for(
    config: AuditApiConfig,
    tokens: TokenProvider,
    api: ApiIdentity,
    *,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], datetime] | None = None,
    retry_wait_scale: float = 1.0,
) -> AuditHttpClient:
    """An :class:`AuditHttpClient` where ``None`` means the real sleep and clock (the adapters' shared constructor)."""
    return AuditHttpClient(
        config,
        tokens,
        api,
        sleep=sleep or time.sleep,
        clock=clock or (lambda: datetime.now(UTC)),
        retry_wait_scale=retry_wait_scale,
    )
