"""JSON-friendly value types that cross trigger/orchestrator/activity boundaries.

Everything here converts to and from plain dicts (``to_json`` / ``from_json``) because the Durable SDK passes
activity inputs and outputs through JSON, and orchestration history must stay small: no records ever appear here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.errors import CollectorError, SinkError, SlotExpiredError, TransientApiError
from shared.redact import redact
from shared.values import AuditFilters, TimeWindow

JsonDict = dict[str, Any]

SOURCES = ("graph", "exchange", "feed")

# Failures worth another try of the same step: throttling/5xx that outlived the activity's own retries, an output
# write that failed (the write is idempotent: same name, replaced whole), and an activity that raised unexpectedly
# (a worker crash or a bug; bounded by max_attempts). A retried Graph submit finds its earlier query first.
RETRYABLE_KINDS = frozenset(
    {TransientApiError.kind, SinkError.kind, SlotExpiredError.kind, "activity_crashed", "budget_unavailable"}
)


def iso(moment: datetime) -> str:
    """UTC ISO 8601 with a ``Z`` suffix (stable text for names, history and manifests)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_iso(text: str) -> datetime:
    """Parse ISO 8601; a timezone-less value is UTC."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


# --- filters ---------------------------------------------------------------------------------------------------
_FILTER_KEYS = ("record_types", "operations", "user_principal_names", "ip_addresses", "object_ids")


def filters_to_json(filters: AuditFilters) -> JsonDict:
    out: JsonDict = {key: list(getattr(filters, key)) for key in _FILTER_KEYS if getattr(filters, key)}
    if filters.keyword:
        out["keyword"] = filters.keyword
    if filters.service:
        out["service"] = filters.service
    return out


def filters_from_json(data: JsonDict | None) -> AuditFilters:
    data = data or {}

    def values(key: str) -> tuple[str, ...]:
        return tuple(str(v) for v in data.get(key, ()))

    keyword = data.get("keyword")
    service = data.get("service")
    return AuditFilters(
        record_types=values("record_types"),
        operations=values("operations"),
        user_principal_names=values("user_principal_names"),
        ip_addresses=values("ip_addresses"),
        object_ids=values("object_ids"),
        keyword=str(keyword) if keyword else None,
        service=str(service) if service else None,
    )


# --- chunks ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Chunk:
    """One half-open window [start, end) of the collection; ``depth`` counts how often it was halved."""

    start: datetime
    end: datetime
    depth: int = 0

    def window(self) -> TimeWindow:
        return TimeWindow(self.start, self.end)

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def halves(self) -> tuple[Chunk, Chunk]:
        span = self.end - self.start
        # Whole seconds keep object names readable; sub-second halves only for windows under two seconds.
        half = timedelta(seconds=int(span.total_seconds()) // 2) if span >= timedelta(seconds=2) else span / 2
        middle = self.start + half
        return Chunk(self.start, middle, self.depth + 1), Chunk(middle, self.end, self.depth + 1)

    def label(self) -> str:
        return f"{iso(self.start)}/{iso(self.end)}"

    def to_json(self) -> JsonDict:
        return {"start": iso(self.start), "end": iso(self.end), "depth": self.depth}

    def span_json(self) -> JsonDict:
        """Only the window, ``{"start", "end"}`` (ranges, expired and provisional windows carry no depth)."""
        return {"start": iso(self.start), "end": iso(self.end)}

    @classmethod
    def from_json(cls, data: JsonDict) -> Chunk:
        return cls(parse_iso(data["start"]), parse_iso(data["end"]), int(data.get("depth", 0)))


# --- activity results ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ActivityError:
    """An expected failure carried across the activity boundary (activities never raise for these)."""

    kind: str
    message: str
    dooms_collection: bool = False
    retry_after: float | None = None

    @property
    def transient(self) -> bool:
        return self.kind == TransientApiError.kind

    @property
    def retryable(self) -> bool:
        """Another attempt at the same step may succeed (see ``RETRYABLE_KINDS``)."""
        return self.kind in RETRYABLE_KINDS and not self.dooms_collection

    @classmethod
    def from_exception(cls, exc: CollectorError) -> ActivityError:
        retry_after = exc.retry_after if isinstance(exc, TransientApiError) else None
        return cls(exc.kind, redact(str(exc))[:500], exc.dooms_collection, retry_after)

    def to_json(self) -> JsonDict:
        return {
            "kind": self.kind,
            "message": self.message,
            "doomsCollection": self.dooms_collection,
            "retryAfter": self.retry_after,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> ActivityError:
        retry_after = data.get("retryAfter")
        return cls(
            str(data.get("kind", "error")),
            str(data.get("message", "")),
            bool(data.get("doomsCollection", False)),
            float(retry_after) if retry_after is not None else None,
        )


@dataclass(frozen=True, slots=True)
class ChunkSummary:
    """What an export/collect activity returns: counts and a claim check, never the records."""

    chunk: Chunk
    records: int
    trimmed: int
    duplicates: int
    malformed: int
    blob: str
    sha256: str
    bytes: int
    incomplete: bool = False
    quarantine_blob: str | None = None
    attempts: int = 1
    untimed: int = 0
    """Of ``malformed``: records whose time could not be read (the manifest counts them once per collection)."""
    filtered_out: int = 0
    """Records inside the window that the request's filters exclude, trimmed (``shared.audit.filter_check``)."""
    late: int = 0
    """Records of this window that its first read did not return and a later read of it did (they reached the
    audit log late: ``activities.reread``); 0 for a window read once."""
    evidence: tuple[JsonDict, ...] = ()
    """Exchange: per record type, what proved its session complete (or why it is incomplete): calls, full calls,
    rows, the closing call's rows against the ResultSize asked (``shared.audit.exchange_evidence.entry``)."""
    exchange: JsonDict | None = None
    """Exchange: the chunk's call tallies (``calls``, ``fullCalls``, ``rows`` of its densest record type)."""
    backfilled: JsonDict | None = None
    """A read by one source that replaced a read of the window by another (a follower's search after its feed):
    ``{"over": <the earlier read's source>, "records": <records this read returned beyond it>}``
    (``activities.reread.with_late``); kept by later reads of the same source."""

    @property
    def source(self) -> str | None:
        """The source whose read the object holds, as its evidence names it (None: a summary without evidence)."""
        named = [str(e["source"]) for e in self.evidence if e.get("source")]
        return named[0] if named else None

    @property
    def incomplete_reasons(self) -> list[str]:
        return [str(e.get("detail")) for e in self.evidence if not e.get("complete", True)]

    def to_json(self) -> JsonDict:
        extra: JsonDict = {}
        if self.evidence:
            extra["evidence"] = [dict(e) for e in self.evidence]
        if self.exchange is not None:
            extra["exchange"] = dict(self.exchange)
        if self.backfilled is not None:
            extra["backfilled"] = dict(self.backfilled)
        return {
            **extra,
            "chunk": self.chunk.to_json(),
            "records": self.records,
            "trimmed": self.trimmed,
            "duplicates": self.duplicates,
            "malformed": self.malformed,
            "blob": self.blob,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "incomplete": self.incomplete,
            "quarantineBlob": self.quarantine_blob,
            "attempts": self.attempts,
            "untimed": self.untimed,
            "filteredOut": self.filtered_out,
            "late": self.late,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> ChunkSummary:
        return cls(
            chunk=Chunk.from_json(data["chunk"]),
            records=int(data["records"]),
            trimmed=int(data["trimmed"]),
            duplicates=int(data["duplicates"]),
            malformed=int(data["malformed"]),
            blob=str(data["blob"]),
            sha256=str(data["sha256"]),
            bytes=int(data["bytes"]),
            incomplete=bool(data.get("incomplete", False)),
            quarantine_blob=data.get("quarantineBlob"),
            attempts=int(data.get("attempts", 1)),
            untimed=int(data.get("untimed", 0)),
            filtered_out=int(data.get("filteredOut", 0)),
            late=int(data.get("late", 0)),
            evidence=tuple(dict(e) for e in data.get("evidence") or ()),
            exchange=dict(data["exchange"]) if isinstance(data.get("exchange"), dict) else None,
            backfilled=dict(data["backfilled"]) if isinstance(data.get("backfilled"), dict) else None,
        )


@dataclass(frozen=True, slots=True)
class ActivityResult:
    """Envelope every chunk activity returns: ``ok`` with ``data``, or ``error``, or ``needs_split``."""

    ok: bool
    data: JsonDict = field(default_factory=dict)
    error: ActivityError | None = None
    needs_split: bool = False

    @classmethod
    def success(cls, data: JsonDict | None = None) -> ActivityResult:
        return cls(True, data or {})

    @classmethod
    def failure(cls, exc: CollectorError) -> ActivityResult:
        return cls(False, error=ActivityError.from_exception(exc))

    @classmethod
    def split(cls, data: JsonDict | None = None) -> ActivityResult:
        return cls(False, data or {}, needs_split=True)

    def to_json(self) -> JsonDict:
        return {
            "ok": self.ok,
            "data": self.data,
            "error": self.error.to_json() if self.error else None,
            "needsSplit": self.needs_split,
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> ActivityResult:
        if not isinstance(data, dict):
            return cls(False, error=ActivityError("protocol", f"unexpected activity result {type(data).__name__}"))
        err = data.get("error")
        return cls(
            bool(data.get("ok")),
            dict(data.get("data") or {}),
            ActivityError.from_json(err) if isinstance(err, dict) else None,
            bool(data.get("needsSplit", False)),
        )
