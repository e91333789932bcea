"""The content blobs of the Management Activity API, cut from the same synthetic tenant as Graph and Exchange.

A record is *published* once: at its creation time plus its ingestion delay (``config.ingestion``, the delay that
also decides when searches see it) plus, for a share of records, an extra feed delay (``feed.extra_delay_*``). Each
content type's publications are cut into blobs of ``blob_interval_seconds``: the blob of interval ``b`` holds the
records of that content type published in ``[b * I, (b + 1) * I)`` and is created (``contentCreated``) just after
the interval ends, a stable few seconds past it. A share of records (``duplicate_rate``) is published a second
time, ``1..duplicate_max_lag_blobs`` intervals later. Only non-empty blobs exist.

Everything is a pure function of (tenant, seed, knobs), so listing, fetching and the ground truth agree, and blobs
are computed a day of intervals at a time (cached) rather than per request.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime

from m365_emulator.config import TenantSpec
from m365_emulator.feed_settings import CONTENT_TYPES, DAY_SECONDS, FeedSettings
from m365_emulator.ingestion import IngestionSettings
from m365_emulator.stream import RecordFilter, iter_matching
from m365_emulator.synth import SynthRecord

_BY_SERVICE = {
    "Exchange": "Audit.Exchange",
    "SharePoint": "Audit.SharePoint",
    "OneDrive": "Audit.SharePoint",
    "AzureActiveDirectory": "Audit.AzureActiveDirectory",
}
_JITTER_MS = 60_000
"""A blob is created up to a minute after its interval ends."""
_CACHE_SIZE = 24


def content_type_of(record: SynthRecord) -> str:
    """The content type a record is published under: its workload's, ``Audit.General`` for every other workload
    (Teams here), as the reference lists them. No synthetic record is a DLP event, so ``DLP.All`` stays empty."""
    return _BY_SERVICE.get(record.service, "Audit.General")


def _uniform(*parts: object) -> float:
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class BlobModel:
    """The knobs blob contents depend on (a cache key: a changed knob builds a new index)."""

    interval: float
    duplicate_rate: float
    duplicate_max_lag: int
    extra_fraction: float
    extra_max: float
    ingestion: tuple[float, float, float, float]
    drop_fraction: float = 0.0
    behind_from: float | None = None
    behind_seconds: float = 0.0

    @classmethod
    def of(cls, feed: FeedSettings, ingestion: IngestionSettings) -> BlobModel:
        return cls(
            feed.blob_interval_seconds,
            feed.duplicate_rate,
            feed.duplicate_max_lag_blobs,
            feed.extra_delay_fraction,
            feed.extra_delay_max_seconds,
            (
                ingestion.typical_min_seconds,
                ingestion.typical_max_seconds,
                ingestion.late_fraction,
                ingestion.max_seconds,
            ),
            feed.drop_fraction,
            feed.behind_from,
            feed.behind_seconds,
        )

    @property
    def settings(self) -> IngestionSettings:
        return IngestionSettings(*self.ingestion)

    @property
    def longest_lag(self) -> float:
        """The most seconds between a record's creation and the end of the last interval that publishes it."""
        extra = self.extra_max if self.extra_fraction > 0 else 0.0
        behind = self.behind_seconds if self.behind_from is not None else 0.0
        return self.ingestion[3] + extra + behind + (self.duplicate_max_lag + 1) * self.interval

    def published_at(self, record: SynthRecord, delay: float) -> float:
        """When the feed publishes the record first (epoch seconds)."""
        moment = record.epoch + delay
        if self.extra_fraction > 0 and _uniform("feed-extra", record.id) < self.extra_fraction:
            moment += _uniform("feed-extra-size", record.id) * self.extra_max
        if self.behind_from is not None and record.epoch >= self.behind_from:
            moment += self.behind_seconds
        return moment

    def dropped(self, record: SynthRecord) -> bool:
        """The feed never publishes this record (``drop_fraction``): searches return it, no blob holds it."""
        return self.drop_fraction > 0 and _uniform("feed-drop", record.id) < self.drop_fraction

    def buckets(self, record: SynthRecord, delay: float) -> tuple[int, ...]:
        """The intervals whose blobs hold the record: its first publication, and its repeat when it has one (none
        for a record the feed dropped)."""
        if self.dropped(record):
            return ()
        first = math.floor(self.published_at(record, delay) / self.interval)
        if self.duplicate_rate > 0 and _uniform("feed-dup", record.id) < self.duplicate_rate:
            return first, first + 1 + math.floor(_uniform("feed-dup-lag", record.id) * self.duplicate_max_lag)
        return (first,)

    def created_ms(self, tenant_id: str, content_type: str, bucket: int) -> int:
        """``contentCreated`` of a blob, in epoch milliseconds: its interval's end plus a stable jitter."""
        end_ms = round((bucket + 1) * self.interval * 1000)
        return end_ms + math.floor(_uniform("feed-created", tenant_id, content_type, bucket) * _JITTER_MS)


@dataclass(frozen=True)
class Blob:
    content_type: str
    bucket: int
    created_ms: int
    records: tuple[SynthRecord, ...]

    @property
    def created(self) -> datetime:
        return datetime.fromtimestamp(self.created_ms / 1000, UTC)


class BlobIndex:
    """The blobs of each tenant, computed a day of intervals at a time and kept for the last few days asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._days: OrderedDict[tuple[TenantSpec, BlobModel, int], dict[tuple[str, int], Blob]] = OrderedDict()

    def _span(self, model: BlobModel) -> int:
        return max(1, math.ceil(DAY_SECONDS / model.interval))

    def _chunk(self, spec: TenantSpec, model: BlobModel, chunk: int) -> dict[tuple[str, int], Blob]:
        key = (spec, model, chunk)
        with self._lock:
            found = self._days.get(key)
            if found is not None:
                self._days.move_to_end(key)
                return found
        built = self._build(spec, model, chunk)
        with self._lock:
            self._days[key] = built
            while len(self._days) > _CACHE_SIZE:
                self._days.popitem(last=False)
        return built

    def _build(self, spec: TenantSpec, model: BlobModel, chunk: int) -> dict[tuple[str, int], Blob]:
        span = self._span(model)
        first, last = chunk * span, (chunk + 1) * span  # buckets [first, last)
        lo, hi = first * model.interval, last * model.interval
        delays = model.settings.snapshot(0.0)
        grouped: dict[tuple[str, int], list[SynthRecord]] = {}
        for record, _ in iter_matching(spec, lo - model.longest_lag, hi, RecordFilter()):
            delay = delays.delay_seconds(record)
            for bucket in model.buckets(record, delay):
                if first <= bucket < last:
                    grouped.setdefault((content_type_of(record), bucket), []).append(record)
        return {
            key: Blob(key[0], key[1], model.created_ms(spec.tenant_id, key[0], key[1]), tuple(records))
            for key, records in grouped.items()
        }

    def blob(self, spec: TenantSpec, model: BlobModel, content_type: str, bucket: int) -> Blob | None:
        return self._chunk(spec, model, bucket // self._span(model)).get((content_type, bucket))

    def created_between(
        self, spec: TenantSpec, model: BlobModel, content_type: str, start_ms: int, end_ms: int
    ) -> list[Blob]:
        """The blobs of a content type with ``start_ms <= contentCreated < end_ms``, by (created, bucket)."""
        if end_ms <= start_ms:
            return []
        interval_ms = model.interval * 1000
        first = math.floor((start_ms - _JITTER_MS) / interval_ms) - 1
        last = math.floor(end_ms / interval_ms)
        span = self._span(model)
        found: list[Blob] = []
        for chunk in range(first // span, last // span + 1):
            for (kind, _), blob in self._chunk(spec, model, chunk).items():
                if kind == content_type and start_ms <= blob.created_ms < end_ms:
                    found.append(blob)
        found.sort(key=lambda b: (b.created_ms, b.bucket))
        return found

    def first_published_ms(self, spec: TenantSpec, model: BlobModel, record: SynthRecord) -> int | None:
        """``contentCreated`` of the first blob holding the record (None: the feed dropped it)."""
        delay = model.settings.snapshot(0.0).delay_seconds(record)
        buckets = model.buckets(record, delay)
        return model.created_ms(spec.tenant_id, content_type_of(record), buckets[0]) if buckets else None


def content_token(content_type: str) -> str:
    """``Audit.SharePoint`` -> ``Audit_SharePoint`` (the spelling inside content ids)."""
    return content_type.replace(".", "_")


_BY_TOKEN = {content_token(kind): kind for kind in CONTENT_TYPES}


def content_id(blob: Blob) -> str:
    """An opaque id shaped like the documented ones (``<stamp>$<stamp>$<type>$<Type>$<n>``), which says which blob
    it is."""
    stamp = blob.created.strftime("%Y%m%d%H%M%S%f")[:17]
    token = content_token(blob.content_type)
    return f"{stamp}${stamp}${token.lower()}${token}${blob.bucket}"


def parse_content_id(text: str) -> tuple[str, int] | None:
    """(content type, interval) of an id made by :func:`content_id`; None when it is not one."""
    parts = text.split("$")
    if len(parts) != 5 or parts[3] not in _BY_TOKEN or parts[2] != parts[3].lower():
        return None
    try:
        bucket = int(parts[4])
    except ValueError:
        return None
    return _BY_TOKEN[parts[3]], bucket
