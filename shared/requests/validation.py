"""Validation of ``POST /api/collections`` bodies: a pure typed function over the request JSON and ``Settings``.

Every rejection is an ``InvalidRequest`` naming the field and a stable rule code (what clients and tests match on)
plus a human message. Nothing is started or written before this has passed.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.audit.ports import AuditFilters
from shared.errors import RequestValidationError
from shared.models import JsonDict, filters_from_json, filters_to_json, iso, parse_iso
from shared.names import is_retry_id, is_safe_id
from shared.requests.source_rules import SourceCatalog, SourceRules
from shared.settings import Settings
from shared.timeline.planning import chunk_count, smallest_interval_minutes

_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_DOMAIN = re.compile(r"^(?=.{4,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_RECORD_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,63}$")
_OPERATION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_SERVICE = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,63}$")
_USER_ID = re.compile(r"^[A-Za-z0-9._%+'@-]{1,256}$")
# Characters no request string may hold: controls (Cc: C0, DEL, C1 such as U+0085), format characters (Cf: bidi
# overrides such as U+202E, zero-width spaces, BOM), line and paragraph separators (Zl U+2028, Zp U+2029), and lone
# surrogates (Cs: not characters at all). They are invisible or break lines in logs, names and the audit APIs' filters.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_ALLOWED_FIELDS = frozenset(
    {
        "tenantId",
        "startDate",
        "endDate",
        "intervalMinutes",
        "maxConcurrency",
        "source",
        "filters",
        "collectionId",
        "highCompleteness",
        "settle",
    }
)
_FILTER_FIELDS = {
    "recordTypes": "record_types",
    "operations": "operations",
    "userIds": "user_principal_names",
    "ipAddresses": "ip_addresses",
    "objectIds": "object_ids",
    "keyword": "keyword",
    "service": "service",
}


class InvalidRequest(RequestValidationError):  # noqa: N818 - reads as the HTTP outcome
    """A request field breaks a rule; ``message`` is the sentence shown to the caller."""

    def __init__(self, field: str, rule: str, message: str) -> None:
        super().__init__(field, rule)
        self.message = message

    def to_json(self) -> JsonDict:
        return {"error": {"field": self.field, "rule": self.rule, "message": self.message}}


@dataclass(frozen=True, slots=True)
class CollectionRequest:
    """A validated collection request."""

    tenant_id: str
    start: datetime
    end: datetime
    interval_minutes: int
    max_concurrency: int
    source: str
    filters: AuditFilters
    collection_id: str | None
    chunk_count: int
    high_completeness: bool = False
    interval_defaulted: bool = False
    """The request named no ``intervalMinutes`` (the plan says so; not part of the stored request)."""
    settle: bool = False
    """Read the provisional windows again once their late-arrival band has passed (``orchestrators.settle``)."""

    def to_json(self) -> JsonDict:
        return {
            "tenantId": self.tenant_id,
            "startDate": iso(self.start),
            "endDate": iso(self.end),
            "intervalMinutes": self.interval_minutes,
            "maxConcurrency": self.max_concurrency,
            "source": self.source,
            "filters": filters_to_json(self.filters),
            "collectionId": self.collection_id,
            "chunkCount": self.chunk_count,
            "highCompleteness": self.high_completeness,
            "settle": self.settle,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> CollectionRequest:
        return cls(
            tenant_id=str(data["tenantId"]),
            start=parse_iso(data["startDate"]),
            end=parse_iso(data["endDate"]),
            interval_minutes=int(data["intervalMinutes"]),
            max_concurrency=int(data["maxConcurrency"]),
            source=str(data["source"]),
            filters=filters_from_json(data.get("filters")),
            collection_id=data.get("collectionId"),
            chunk_count=int(data["chunkCount"]),
            high_completeness=bool(data.get("highCompleteness", False)),
            settle=bool(data.get("settle", False)),
        )


def checked_body(body: Any, allowed: frozenset[str] | set[str]) -> JsonDict:
    """``body`` when it is a JSON object of ``allowed`` fields whose strings hold no invisible characters; else the
    ``InvalidRequest`` naming the first broken rule."""
    if not isinstance(body, dict):
        raise InvalidRequest("body", "type", "the request body must be a JSON object")
    for key in body:
        if key not in allowed:
            raise InvalidRequest(
                str(key)[:64], "unknown_field", f"unknown field; allowed: {', '.join(sorted(allowed))}"
            )
    _reject_invisible_characters(body)
    return body


def validate_collection_request(
    body: Any, settings: Settings, now: datetime, sources: SourceCatalog
) -> CollectionRequest:
    """Validate a parsed JSON body; raises ``InvalidRequest`` on the first broken rule. ``sources``: every source by
    name (``shared.sources.registry.SOURCES``), whose rules apply where a rule depends on the source."""
    body = checked_body(body, _ALLOWED_FIELDS)
    tenant_id = _tenant(body.get("tenantId"))
    start = _date(body, "startDate")
    end = _date(body, "endDate")
    if end <= start:
        raise InvalidRequest("endDate", "order", "endDate must be after startDate")
    if end > now:
        raise InvalidRequest("endDate", "future", "endDate must not be in the future")
    oldest = now - timedelta(days=settings.max_lookback_days)
    if start < oldest:
        raise InvalidRequest(
            "startDate",
            "retention",
            f"startDate is older than {settings.max_lookback_days} days (COLLECTOR_MAX_LOOKBACK_DAYS): no tenant keeps "
            "audit records that long (Audit Premium's longest retention is 10 years)",
        )

    rules = source_of(body.get("source", settings.default_source), sources)
    source = rules.name
    rules.check_range(start, now, settings)

    defaulted = "intervalMinutes" not in body
    interval = _whole_number(body, "intervalMinutes", default_interval_minutes(rules, settings))
    if not settings.min_interval_minutes <= interval <= settings.max_interval_minutes:
        raise InvalidRequest(
            "intervalMinutes",
            "range",
            f"intervalMinutes must be between {settings.min_interval_minutes} and {settings.max_interval_minutes}",
        )
    count = chunk_count(start, end, timedelta(minutes=interval))
    if count > settings.max_chunks:
        smallest = smallest_interval_minutes(start, end, settings.max_chunks)
        hint = (
            f"use intervalMinutes >= {smallest}"
            if smallest <= settings.max_interval_minutes
            else "shorten the date range (it does not fit even at the largest interval)"
        )
        raise InvalidRequest(
            "intervalMinutes", "too_many_chunks", f"{count} chunks exceed the limit of {settings.max_chunks}; {hint}"
        )

    concurrency = _whole_number(body, "maxConcurrency", settings.default_concurrency)
    if not 1 <= concurrency <= settings.max_concurrency:
        raise InvalidRequest(
            "maxConcurrency", "range", f"maxConcurrency must be between 1 and {settings.max_concurrency}"
        )

    rules.check_tenant(tenant_id)
    high_completeness = high_completeness_of(body.get("highCompleteness", False), rules, sources)
    filters = source_filters(body.get("filters"), rules, settings)

    collection_id = body.get("collectionId")
    if collection_id is not None and (not isinstance(collection_id, str) or not is_safe_id(collection_id)):
        raise InvalidRequest(
            "collectionId",
            "format",
            "collectionId must be 1-64 letters, digits, '-' or '_' starting with a letter or digit",
        )
    if collection_id is not None and collection_id.lower() in RESERVED_IDS:
        raise InvalidRequest(
            "collectionId", "reserved", f"collectionId {collection_id!r} is a path of the API (the collections page)"
        )
    if collection_id is not None and collection_id.lower().startswith("follow-"):
        raise InvalidRequest(
            "collectionId",
            "reserved",
            "collectionId may not start with follow-: followers name their days' collections so",
        )
    if collection_id is not None and is_retry_id(collection_id):
        raise InvalidRequest(
            "collectionId", "reserved", "collectionId may not end in -retry-<number>: retry-failed names its retries so"
        )
    if collection_id is not None and collection_id != collection_id.lower():
        # The Durable Task Framework folds the case of instance ids in places (sessions, the entity message sorter)
        # while blob names and instance look-ups keep it: two ids differing only in case would be two collections
        # that share one entity inbox (one of them then waits for the tenant budget for ever) and, on a
        # case-insensitive disk, one output folder.
        raise InvalidRequest(
            "collectionId",
            "lowercase",
            f"collectionId must be lower case (use {collection_id.lower()!r}): ids that differ only in case would "
            "collide in the Durable Task Framework",
        )
    settle = body.get("settle", settings.settle_default)
    if not isinstance(settle, bool):
        raise InvalidRequest("settle", "type", "settle must be true or false")
    return CollectionRequest(
        tenant_id,
        start,
        end,
        interval,
        concurrency,
        source,
        filters,
        collection_id,
        count,
        high_completeness,
        interval_defaulted=defaulted,
        settle=settle,
    )


def source_of(value: Any, sources: SourceCatalog) -> SourceRules:
    """The rules of the source a request names (any case); ``InvalidRequest`` naming the choices otherwise."""
    if not isinstance(value, str) or value.lower() not in sources:
        raise InvalidRequest("source", "choice", f"source must be one of {', '.join(sources)}")
    return sources[value.lower()]


def default_interval_minutes(rules: SourceRules, settings: Settings) -> int:
    """The chunk length of a request that names none: the source's (a day per Graph query, an hour of Exchange), within
    the configured bounds."""
    wanted = rules.default_interval_minutes(settings)
    return min(max(wanted, settings.min_interval_minutes), settings.max_interval_minutes)


def high_completeness_of(value: Any, rules: SourceRules, sources: SourceCatalog) -> bool:
    """``highCompleteness``: a boolean, true only for a source that has the option (the rule names those that do)."""
    if not isinstance(value, bool):
        raise InvalidRequest("highCompleteness", "type", "highCompleteness must be true or false")
    if value and not rules.high_completeness:
        having = sorted(name for name, other in sources.items() if other.high_completeness)
        listed = " or ".join(having) or "no"
        raise InvalidRequest(
            "highCompleteness", f"{'_'.join(having)}_only", f"highCompleteness is an option of the {listed} source only"
        )
    return value


RESERVED_IDS = frozenset({"view"})
"""Ids that are literal segments of the API's routes: ``GET /api/collections/view`` is the collections page, so a
collection named ``view`` (routes are case-insensitive) could never show its summary."""


def _invisible(text: str) -> str | None:
    """The first character of ``text`` in a forbidden category, as ``U+XXXX (category)``; None when clean."""
    for char in text:
        category = unicodedata.category(char)
        if category in _INVISIBLE_CATEGORIES:
            return f"U+{ord(char):04X} ({category})"
    return None


def _reject_invisible_characters(body: JsonDict) -> None:
    """Every string value, at any depth, must be free of invisible and line-breaking characters.

    Checked before any field rule (which may strip or fold), so nothing invisible is normalised away by accident.
    The field named is the top-level key, or ``filters.<key>`` inside ``filters``.
    """
    stack: list[tuple[str, Any]] = []
    for key, value in body.items():
        if key == "filters" and isinstance(value, dict):
            stack += [(f"filters.{name}", item) for name, item in value.items()]
        else:
            stack.append((str(key), value))
    while stack:
        field, value = stack.pop()
        if isinstance(value, str):
            found = _invisible(value)
            if found is not None:
                raise InvalidRequest(
                    field[:64], "characters", f"{field[:64]} contains an invisible or control character {found}"
                )
        elif isinstance(value, list):
            stack += [(field, item) for item in value]
        elif isinstance(value, dict):
            stack += [(field, item) for item in value.values()]


def validate_tenant_id(value: Any) -> str:
    """``tenantId`` checked by the same rules as in ``POST /api/collections`` (for other endpoints: the doctor)."""
    return _tenant(value)


def _tenant(value: Any) -> str:
    if value is None:
        raise InvalidRequest("tenantId", "required", "tenantId is required")
    if not isinstance(value, str):
        raise InvalidRequest("tenantId", "type", "tenantId must be a string")
    # Rejected, not stripped: the value becomes an authority URL, an API path and the output prefix, so the caller
    # must send exactly the tenant they mean (a stray space or newline is a client bug worth hearing about).
    if value != value.strip():
        raise InvalidRequest("tenantId", "whitespace", "tenantId must not start or end with whitespace")
    # ASCII before any case folding: str.lower() maps some non-ASCII characters onto ASCII letters (U+212A KELVIN
    # SIGN -> "k"), which would silently turn a look-alike into a different, valid tenant.
    if not value.isascii():
        raise InvalidRequest("tenantId", "ascii", "tenantId must be ASCII (a GUID or a DNS domain name)")
    text = value.lower()
    if not (_GUID.fullmatch(text) or _DOMAIN.fullmatch(text)):
        raise InvalidRequest(
            "tenantId", "format", "tenantId must be a GUID or a domain such as contoso.onmicrosoft.com"
        )
    return text


def _date(body: JsonDict, name: str) -> datetime:
    value = body.get(name)
    if value is None:
        raise InvalidRequest(name, "required", f"{name} is required")
    if not isinstance(value, str):
        raise InvalidRequest(name, "type", f"{name} must be an ISO 8601 string")
    try:
        return parse_iso(value.strip())
    except ValueError:
        raise InvalidRequest(name, "format", f"{name} must be ISO 8601, e.g. 2024-11-17T10:00:00Z") from None


def _whole_number(body: JsonDict, name: str, default: int) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequest(name, "type", f"{name} must be a number")
    if isinstance(value, float) and not value.is_integer():
        raise InvalidRequest(name, "whole_number", f"{name} must be a whole number")
    return int(value)


def source_filters(raw: Any, rules: SourceRules, settings: Settings) -> AuditFilters:
    """The request's ``filters`` as the source can apply them (a filter it cannot apply is refused rather than
    collected unfiltered). A source the configured cloud does not offer is refused first (every starter reads filters
    here)."""
    rules.check_cloud(settings)
    filters = _filters(raw, settings)
    rules.check_filters(filters)
    return filters


def _filters(value: Any, settings: Settings) -> AuditFilters:
    if value is None:
        return AuditFilters()
    if not isinstance(value, dict):
        raise InvalidRequest("filters", "type", "filters must be an object")
    out: dict[str, Any] = {}
    for key, item in value.items():
        field = f"filters.{key}"
        if key not in _FILTER_FIELDS:
            raise InvalidRequest(field[:64], "unknown_field", f"unknown filter; allowed: {', '.join(_FILTER_FIELDS)}")
        if key == "keyword":
            out["keyword"] = _keyword(item)
            continue
        if key == "service":
            out["service"] = _service(item)
            continue
        if not isinstance(item, list) or not all(isinstance(v, str) for v in item):
            raise InvalidRequest(field, "type", f"{field} must be a list of strings")
        if len(item) > settings.max_filter_values:
            raise InvalidRequest(field, "count", f"{field} accepts at most {settings.max_filter_values} values")
        out[_FILTER_FIELDS[key]] = tuple(_filter_value(key, field, v) for v in item)
    return AuditFilters(**out)


def _keyword(item: Any) -> str | None:
    if item is None:
        return None
    if not isinstance(item, str):
        raise InvalidRequest("filters.keyword", "type", "filters.keyword must be a string")
    if len(item) > 256:
        raise InvalidRequest("filters.keyword", "length", "filters.keyword accepts at most 256 characters")
    return item.strip() or None


def _service(item: Any) -> str | None:
    """One workload, as audit records name it in ``service`` (``Exchange``, ``SharePoint``, ``OneDrive``, ...)."""
    if item is None:
        return None
    if not isinstance(item, str):
        raise InvalidRequest("filters.service", "type", "filters.service must be a string (one service)")
    text = item.strip()
    if text and not _SERVICE.fullmatch(text):
        raise InvalidRequest(
            "filters.service", "characters", "filters.service must be a service name such as Exchange or SharePoint"
        )
    return text or None


def _filter_value(key: str, field: str, value: str) -> str:
    text = value.strip()
    if not text:
        raise InvalidRequest(field, "empty", f"{field} values must not be empty")
    if key == "ipAddresses":
        try:
            return str(ipaddress.ip_address(text))
        except ValueError:
            raise InvalidRequest(field, "format", f"{field} values must be IPv4 or IPv6 addresses") from None
    if key == "objectIds":
        if len(text) > 1024:
            raise InvalidRequest(field, "length", f"{field} values accept at most 1024 characters")
        return text
    pattern = {"recordTypes": _RECORD_TYPE, "operations": _OPERATION, "userIds": _USER_ID}[key]
    if len(text) > 256:
        raise InvalidRequest(field, "length", f"{field} values accept at most 256 characters")
    if not pattern.fullmatch(text):
        raise InvalidRequest(field, "characters", f"{field} value has characters that are not allowed")
    return text
