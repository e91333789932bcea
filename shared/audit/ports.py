"""The audit-source port: what the activities need from an audit API, whatever API it is.

Two shapes exist in Microsoft 365:

* ``AuditQueryApi`` — asynchronous server-side queries (Microsoft Graph ``/security/auditLog/queries``):
  create, poll (the orchestrator polls with durable timers), page the records, delete.
* ``AuditSearchApi`` — synchronous paged search sessions (Exchange ``Search-UnifiedAuditLog`` through
  ``InvokeCommand`` with ``ReturnLargeSet``): probe the count, then page a session.

Both yield records normalised to the Graph ``auditLogRecord`` shape (``id``, ``createdDateTime``,
``auditLogRecordType``, ``operation``, ``userPrincipalName``, ..., ``auditData`` as an object), page by page,
so nothing holds a whole window in memory. Errors are the ``shared.errors`` tree.

A third shape, ``ActivityFeedApi`` (the Office 365 Management Activity API), is a feed rather than a search: content
blobs listed by when they were published, per subscribed content type.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from shared.values import AuditFilters, AuditRecord, MalformedRecord, RecordPage, TimeWindow

if TYPE_CHECKING:
    from shared.audit.exchange_paging import SessionCursor

__all__ = [
    "FEED_CONTENT_TYPES",
    "ActivityFeedApi",
    "AuditFilters",
    "AuditQueryApi",
    "AuditRecord",
    "AuditSearchApi",
    "DeleteOutcome",
    "FeedContent",
    "FeedSubscription",
    "MalformedRecord",
    "QueryState",
    "QueryStatus",
    "RecordPage",
    "TimeWindow",
]


class QueryState(enum.Enum):
    PENDING = "pending"  # notStarted, queued, running
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class QueryStatus:
    state: QueryState
    raw_status: str
    record_count_limit_exceeded: bool = False
    """``isRecordCountLimitExceeded`` (absent from the schema before September 2026: False then)."""
    approximate_record_count: int | None = None
    record_count_limit: int | None = None
    """``recordCountLimit`` where the service says it."""


@dataclass(frozen=True, slots=True)
class DeleteOutcome:
    """What a query DELETE did: ``deleted`` only when the service said so with a 2xx."""

    deleted: bool
    detail: str = ""
    """Why not, when not (the service's answer)."""


class AuditQueryApi(Protocol):
    def create_query(self, window: TimeWindow, filters: AuditFilters, *, display_name: str) -> str:
        """Submit a query; returns its id."""
        ...

    def get_query(self, query_id: str) -> QueryStatus: ...

    def iter_record_pages(self, query_id: str) -> Iterator[RecordPage]:
        """Pages of a succeeded query, following ``@odata.nextLink``."""
        ...

    def delete_query(self, query_id: str) -> DeleteOutcome:
        """Ask the service to delete the query. A 404 is not an error but deletes nothing (``deleted=False``)."""
        ...


class AuditSearchApi(Protocol):
    @property
    def session_cap(self) -> int:
        """Most rows one session can deliver (Exchange: 50,000): a session that reaches it proves nothing."""
        ...

    def record_types(self, filters: AuditFilters) -> list[str | None]:
        """One session per record type the filters name (``[None]`` for all types in one session)."""
        ...

    def read_block(
        self,
        window: TimeWindow,
        filters: AuditFilters,
        cursor: SessionCursor,
        *,
        record_type: str | None,
        high_completeness: bool = False,
        allow_over_cap: bool = False,
    ) -> Iterator[RecordPage]:
        """One call of a paged session: its next block of records, page by page; ``cursor`` advances in place and,
        once the last page is read, holds the call's facts (``cursor.last``: rows against ResultSize asked).

        Raises ``NeedsSplitError`` (the service announces more than the session cap, unless ``allow_over_cap``),
        ``SessionBrokenError`` when the rows do not continue the session, and ``AmbiguousResponseError`` when the
        call's outcome is unknown. ``high_completeness`` asks for completeness over speed (``-HighCompleteness``).
        """
        ...


FEED_CONTENT_TYPES = ("Audit.AzureActiveDirectory", "Audit.Exchange", "Audit.SharePoint", "Audit.General", "DLP.All")
"""The Office 365 Management Activity API's content types: Entra, Exchange, SharePoint and OneDrive, every other
workload (``Audit.General``: Teams and the rest), DLP events."""


@dataclass(frozen=True, slots=True)
class FeedSubscription:
    """A tenant's subscription to one content type, as the feed lists it."""

    content_type: str
    status: str
    """``enabled`` or ``disabled`` (the service's words)."""

    @property
    def enabled(self) -> bool:
        return self.status.lower() == "enabled"


@dataclass(frozen=True, slots=True)
class FeedContent:
    """One content blob the feed lists: where it is, and when it was published and stops being retrievable.

    ``created`` (``contentCreated``) is when the blob became available, not when its records happened: a blob holds
    records of any earlier time, in any order, and a record may come again in a later blob.
    """

    content_type: str
    content_id: str
    content_uri: str
    created: datetime
    expiration: datetime


class ActivityFeedApi(Protocol):
    """The Office 365 Management Activity API of one tenant: a feed of content blobs per subscribed content type.

    Records are listed by when they were *published*, never by when they happened: a source reads a publication
    window and keeps the records of the event window it wants (``shared.audit.feed_reading``). Errors are the
    ``shared.errors`` tree, with the feed's own in ``shared.audit.feed_errors``.
    """

    def list_subscriptions(self) -> list[FeedSubscription]: ...

    def ensure_subscriptions(self, content_types: Sequence[str]) -> list[FeedSubscription]:
        """Starts each content type's subscription unless it is enabled already; returns them as they now stand.

        A subscription started now lists only content published from now on (the service may take hours to list
        the first). Raises ``FeedSubscriptionError`` when one cannot be enabled.
        """
        ...

    def list_content(self, content_type: str, published: TimeWindow) -> Iterator[FeedContent]:
        """The blobs of a content type created in ``published`` (start inclusive, end exclusive), oldest first,
        every page followed. Raises ``FeedWindowError`` when the window starts more than 7 days back, and
        ``FeedSubscriptionError`` when the content type has no enabled subscription."""
        ...

    def fetch(self, content: FeedContent) -> RecordPage:
        """One blob's records, normalised like every source's (its repeats of other blobs' records included).
        Raises ``FeedContentExpiredError`` once the blob has expired."""
        ...
