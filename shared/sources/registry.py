"""Every audit source by its name: one line per source (``SOURCES``), and what the rest of the app asks of "the source
named so" (the window of a collection, its request rules, the sections every status, plan and manifest carries).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shared.models import JsonDict
from shared.requests import validation
from shared.requests.collection_spec import CollectionSpec
from shared.requests.validation import CollectionRequest
from shared.settings import Settings
from shared.sources.base import Source
from shared.sources.exchange import ExchangeSource
from shared.sources.feed import FeedSource
from shared.sources.graph import GraphSource
from shared.window.machine import EPOCH, CollectionWindow
from shared.window.state import Carried

SOURCES: Mapping[str, Source] = {
    source.name: source
    for source in (
        GraphSource(),
        ExchangeSource(),
        FeedSource(),
    )
}
"""The sources a request may name, in the order the API lists them (``shared.models.SOURCES`` holds the same names
for the layers below this one: a test checks that they agree)."""


def source(name: str) -> Source:
    """The source named ``name``; ``ValueError`` for a name no source has."""
    found = SOURCES.get(name)
    if found is None:
        raise ValueError(f"no audit source {name!r}; the sources are {', '.join(SOURCES)}")
    return found


def follower_feed() -> Source | None:
    """The source a follower reads its windows from where it can (``Source.follower_feed``), if any."""
    return next((each for each in SOURCES.values() if each.follower_feed), None)


def window_for(
    spec: CollectionSpec, carried: Carried | None = None, *, now: datetime = EPOCH, budget_token: str = ""
) -> CollectionWindow:
    """The sliding window of a collection, holding its source's lanes (built from the carried state, on every
    replay)."""
    state = carried or Carried()
    lanes = source(spec.source).lanes(spec, state)
    return CollectionWindow(spec, state, source=lanes, now=now, budget_token=budget_token)


def validate_collection_request(body: Any, settings: Settings, now: datetime) -> CollectionRequest:
    """``POST /api/collections``'s rules, with every source's (``shared.requests.validation``)."""
    return validation.validate_collection_request(body, settings, now, SOURCES)


ALWAYS: Mapping[str, tuple[str, ...]] = {
    "status": ("queries", "exchange"),
    "plan": ("graphQueries", "dailyQueryQuota", "submissions"),
    "follow": ("graphQueriesPerDay", "dailyQueryQuota", "submissions"),
    "manifest": ("filterCheck", "queries", "exchange"),
}
"""The fields every status, summary, plan, follower plan and manifest has carried since before sources were objects
(``None`` where they are not the collection's source's): their consumers read them as they always did. A source added
since carries its own fields only in its own collections' answers, so adding one changes no other source's."""


def sections(keys: str, own: str | None, fields: JsonDict) -> JsonDict:
    """The fields that are always there in a ``status``, ``plan`` or ``manifest`` (``ALWAYS[keys]``) as ``None``, then
    ``fields`` of the source named ``own``."""
    out: JsonDict = dict.fromkeys(ALWAYS[keys])
    if own is not None:
        out.update(fields)
    return out


def status_sections(status: Mapping[str, Any]) -> JsonDict:
    """Each source's section of a window's status or output as it stands (the sections always there included)."""
    out: JsonDict = {key: status.get(key) for key in ALWAYS["status"]}
    out.update({each.status_key: status[each.status_key] for each in SOURCES.values() if each.status_key in status})
    return out


def manifest_sections(payload: JsonDict) -> JsonDict:
    """The manifest fields of the collection's own source (named by ``payload["source"]``), with those always there."""
    name = payload.get("source")
    own = SOURCES.get(name) if isinstance(name, str) else None
    return sections("manifest", own.name if own else None, own.manifest(payload) if own else {})
