"""The Office 365 Management Activity API's errors: its ``AF…`` codes read into the ``shared.errors`` tree.

The service answers ``{"error": {"code": "AF…", "message": …}}`` and the HTTP status alone does not tell the codes
apart (most are 400). The codes are the reference's ("Errors" in office-365-management-activity-api-reference):

* AF10001 — the token lacks ``ActivityFeed.Read``: a missing permission (whatever the status).
* AF20022 / AF20023 — no subscription for the content type / it was disabled: :class:`FeedSubscriptionError`.
* AF20024 — "The subscription is already enabled" (not in the reference; seen on the wire when starting an enabled
  subscription): :class:`FeedSubscriptionError` too, which :meth:`ensure_subscriptions` takes as success.
* AF20030 / AF20055 — the listing window breaks the rules (both bounds or none, at most 24 hours apart, start at most
  7 days back; the reference names AF20030, clients see AF20055): :class:`FeedWindowError`.
* AF20051 — the blob has expired: :class:`FeedContentExpiredError`.
* AF429 — too many requests (delivered as a 403 in the troubleshooting article's example), AF50000/AF50005/AF50006 —
  internal errors: transient, retried.

Every other code keeps the HTTP layer's reading (a 4xx: :class:`PermanentApiError` naming the code).
"""

from __future__ import annotations

from shared.audit.error_body import ErrorBody, Problem
from shared.errors import CollectorError, PermanentApiError

SUBSCRIPTION_MISSING = "AF20022"
SUBSCRIPTION_DISABLED = "AF20023"
SUBSCRIPTION_ENABLED = "AF20024"
CONTENT_EXPIRED = "AF20051"
WINDOW_CODES = frozenset({"AF20030", "AF20055"})
PERMISSION_CODE = "AF10001"
TRANSIENT_CODES = frozenset({"AF429", "AF50000", "AF50005", "AF50006"})


class FeedError(PermanentApiError):
    """An answer of the Management Activity API that retrying the same call will not change; ``code`` is its AF
    code ("" when the check was the collector's own)."""

    kind = "feed"

    def __init__(self, message: str, *, code: str = "", status: int | None = None) -> None:
        super().__init__(message, status=status)
        self.code = code


class FeedSubscriptionError(FeedError):
    """The content type has no enabled subscription (AF20022, AF20023), or starting it was refused. Every window of
    the content type fails alike until it is started: the source falls back to search."""

    kind = "feed_subscription"
    dooms_collection = True


class FeedWindowError(FeedError):
    """The listing window is one the feed refuses: older than 7 days (its content is gone from the feed) or longer
    than it lists at once. A window older than the feed keeps is read by search."""

    kind = "feed_window"


class FeedContentExpiredError(FeedError):
    """The blob expired before it was fetched (AF20051): its records are no longer in the feed; the window they
    belong to must be read by search."""

    kind = "feed_content_expired"

    def __init__(self, message: str, *, content_id: str = "", status: int | None = None) -> None:
        super().__init__(message, code=CONTENT_EXPIRED, status=status)
        self.content_id = content_id


def read_feed_error(status: int, body: ErrorBody) -> Problem | CollectorError | None:
    """The HTTP layer's ``read_error`` for the feed: what an ``AF…`` code means (see the module docstring)."""
    code = body.code.upper()
    detail = f"{status} {body.code}: {body.message}"
    if code == PERMISSION_CODE:
        return Problem.PERMISSION
    if code in TRANSIENT_CODES:
        return Problem.TRANSIENT
    if code in (SUBSCRIPTION_MISSING, SUBSCRIPTION_DISABLED, SUBSCRIPTION_ENABLED):
        return FeedSubscriptionError(f"Management Activity API: {detail}", code=code, status=status)
    if code in WINDOW_CODES:
        return FeedWindowError(f"Management Activity API refused the window: {detail}", code=code, status=status)
    if code == CONTENT_EXPIRED:
        return FeedContentExpiredError(f"Management Activity API: {detail}", status=status)
    return None
