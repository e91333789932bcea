"""The Management Activity API's listing rules, pure: window pieces, bounds, next-page links, descriptors.

* A listing names a window of ``contentCreated`` (start inclusive, end exclusive) at most 24 hours long whose start
  is at most 7 days back. One public client saw windows of exactly 24 hours refused, so a window is listed in pieces
  of :data:`LIST_SPAN` (12 hours).
* Bounds are sent as ``YYYY-MM-DDTHH:MM:SS`` (UTC), a form the reference lists; a window's bounds are widened to
  whole seconds (a blob listed twice is listed once, by its id).
* The next page is named by a response header: ``NextPageUri`` in the reference, ``NextPageUrl`` in its
  troubleshooting article: both are read. The link carries the window and a page token, not the
  ``PublisherIdentifier``, which is added again. The bearer token goes wherever a link points, so a next-page link
  or a ``contentUri`` is followed only on the configured host.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from shared.audit.ports import FeedContent, TimeWindow
from shared.errors import PermanentApiError
from shared.records.rules import parse_timestamp

LIST_SPAN = timedelta(hours=12)
"""The longest window one listing asks for."""
LOOKBACK = timedelta(days=7)
"""How far back a listing's start may lie ("no more than 7 days in the past")."""
NEXT_PAGE_HEADERS = ("NextPageUri", "NextPageUrl")
PUBLISHER_PARAMETER = "PublisherIdentifier"


def whole_seconds(window: TimeWindow) -> TimeWindow:
    """The window widened to whole seconds (start down, end up)."""
    start = window.start.astimezone(UTC).replace(microsecond=0)
    end = window.end.astimezone(UTC)
    if end.microsecond:
        end = end.replace(microsecond=0) + timedelta(seconds=1)
    return TimeWindow(start, end)


def listing_pieces(window: TimeWindow, span: timedelta = LIST_SPAN) -> list[TimeWindow]:
    """Consecutive pieces of at most ``span`` that cover the window (widened to whole seconds)."""
    whole = whole_seconds(window)
    count = max(1, math.ceil((whole.end - whole.start) / span))
    pieces = []
    start = whole.start
    for _ in range(count):
        end = min(start + span, whole.end)
        pieces.append(TimeWindow(start, end))
        start = end
    return pieces


def bound(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def next_page_link(headers: Mapping[str, str]) -> str | None:
    """The next page's URL named by either header spelling (header names are case-insensitive), or None."""
    lowered = {name.lower(): value for name, value in headers.items()}
    for name in NEXT_PAGE_HEADERS:
        value = lowered.get(name.lower(), "").strip()
        if value:
            return value
    return None


def pinned(link: str, base_url: str, what: str) -> str:
    """``link`` when it is on ``base_url``'s scheme and host; else PermanentApiError (no token leaves the host)."""
    origin, parts = urlsplit(base_url), urlsplit(link)
    if (parts.scheme, parts.netloc.lower()) != (origin.scheme, origin.netloc.lower()):
        raise PermanentApiError(f"Management Activity API {what} points outside {origin.scheme}://{origin.netloc}")
    return link


def publisher_params(link: str, publisher: str) -> dict[str, str] | None:
    """The query parameter to add so ``link`` carries the ``PublisherIdentifier`` (None when it already does)."""
    present = {name.lower() for name, _ in parse_qsl(urlsplit(link).query, keep_blank_values=True)}
    return None if PUBLISHER_PARAMETER.lower() in present else {PUBLISHER_PARAMETER: publisher}


def parse_descriptor(item: Any, content_type: str) -> FeedContent:
    """A listing's descriptor as :class:`FeedContent`; PermanentApiError naming what is missing or unreadable."""
    if not isinstance(item, dict):
        raise PermanentApiError("Management Activity API listed content that is not a JSON object")
    fields = {}
    for name in ("contentId", "contentUri", "contentCreated", "contentExpiration"):
        value = item.get(name)
        if not isinstance(value, str) or not value.strip():
            raise PermanentApiError(f"Management Activity API listed content without {name}")
        fields[name] = value.strip()
    try:
        created = parse_timestamp(fields["contentCreated"])
        expiration = parse_timestamp(fields["contentExpiration"])
    except ValueError:
        raise PermanentApiError(
            f"Management Activity API listed content {fields['contentId']} with an unreadable time"
        ) from None
    listed_type = item.get("contentType")
    return FeedContent(
        content_type=listed_type if isinstance(listed_type, str) and listed_type else content_type,
        content_id=fields["contentId"],
        content_uri=fields["contentUri"],
        created=created,
        expiration=expiration,
    )
