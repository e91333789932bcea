"""What a follower's start asks of the feed: does the app hold ``ActivityFeed.Read`` in the tenant, and is every
content type subscribed (one it had to start lists nothing published before, so the windows before it are search's).

The check is the feed's subscription list (a token without the permission is refused there, ``AF10001``) and, for a
content type not enabled, its start: the same calls a feed collection's first read makes. Anything it cannot do
leaves the follower on its search source, with the service's words as the reason.
"""

from __future__ import annotations

from datetime import timedelta

from shared.audit.config import AuditApiConfig
from shared.audit.feed import FEED_PERMISSION, ActivityFeedClient
from shared.audit.feed_paging import LOOKBACK
from shared.clock import utc_now
from shared.errors import CollectorError
from shared.redact import redact
from shared.settings import Settings
from shared.sources.base import FollowAccess
from shared.sources.feed.calls import CONTENT_TYPES

REACH_MARGIN = timedelta(hours=2)
"""A follower reads a window by the feed only while it began this far inside the feed's 7 days: its pass may start
a little after it was planned, and a listing is refused from the first second past the look-back."""
REACH = LOOKBACK - REACH_MARGIN


def follow_access(settings: Settings, tenant_id: str) -> FollowAccess:
    """Whether a follower may read the feed in ``tenant_id`` now, and from when on (``FollowAccess``)."""
    config = AuditApiConfig(**settings.audit.config_kwargs(tenant_id))
    client = ActivityFeedClient(config, clock=lambda: utc_now(settings))
    try:
        before = {s.content_type: s for s in client.list_subscriptions()}
        missing = [t for t in CONTENT_TYPES if t not in before or not before[t].enabled]
        if missing:
            client.ensure_subscriptions(CONTENT_TYPES)
        now = utc_now(settings)
    except CollectorError as exc:
        return FollowAccess(
            False,
            f"the feed refused the follower's subscription check ({exc.kind}: {redact(str(exc))[:240]}); every window "
            f"is read by search (grant the app {FEED_PERMISSION} of the Office 365 Management APIs and start the "
            "follower again to read the feed)",
        )
    finally:
        client.close()
    if missing:
        return FollowAccess(
            True,
            f"{FEED_PERMISSION} granted; the follower's start started the subscriptions of {', '.join(missing)}: the "
            "feed lists nothing published before, so the windows that began earlier are read by search",
            since=now.replace(microsecond=0),
        )
    return FollowAccess(True, f"{FEED_PERMISSION} granted and every content type's subscription enabled")
