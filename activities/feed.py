"""The feed's chunk activity (a thin trigger over ``activities.feed_reads``), and its port: one Management Activity API
client per tenant and worker, on the app's clock (a test's moved clock too)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime

import azure.durable_functions as df

from activities import runtime
from activities.bodies import _guard
from activities.chunk_parts import ChunkParts
from activities.feed_cache import FeedCache
from activities.feed_reads import feed_read
from shared.audit.ports import ActivityFeedApi
from shared.clock import utc_now
from shared.errors import CollectorError
from shared.log_fields import chunk_context
from shared.models import ActivityResult, JsonDict
from shared.sinks import ChunkSink
from shared.sources.feed.calls import ACTIVITY, FeedRead

bp = df.Blueprint()


@functools.lru_cache(maxsize=64)
def feed_api(tenant_id: str) -> ActivityFeedApi:
    from shared.audit import AuditApiConfig
    from shared.audit.feed import ActivityFeedClient

    settings = runtime.settings()
    config = AuditApiConfig(**settings.audit.config_kwargs(tenant_id))
    return ActivityFeedClient(config, clock=lambda: utc_now(settings))


def read_chunk(api: ActivityFeedApi, sink: ChunkSink, payload: JsonDict, now: Callable[[], datetime]) -> JsonDict:
    """One read of the lane's chunk, as the activity runs it (``activities.feed_reads.feed_read``, each blob fetched
    once per tenant through the content cache in ``sink``: ``activities.feed_cache``); ``now``: the app's clock."""
    read = FeedRead.from_json(payload)
    base = read.call
    parts = ChunkParts(sink, tenant_id=base.tenant_id, collection_id=base.collection_id, chunk=base.chunk)
    return _guard(lambda: feed_read(api, parts, read, now, FeedCache(sink, base.tenant_id)))


@bp.activity_trigger(input_name="payload", activity=ACTIVITY)  # type: ignore[untyped-decorator]
def feed_read_activity(payload: JsonDict) -> JsonDict:
    with chunk_context(payload, source="feed"):
        try:
            api = feed_api(str(payload["tenantId"]))
            sink = runtime.sink()
        except CollectorError as exc:
            return ActivityResult.failure(exc).to_json()
        settings = runtime.settings()
        return read_chunk(api, sink, payload, lambda: utc_now(settings))
