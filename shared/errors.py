"""The collector's error tree. Every error the app raises on purpose is one of these.

::

    CollectorError
    ├── ConfigError            a setting is missing or invalid (names the setting)
    ├── RequestValidationError a request field breaks a rule (names the field and the rule) → HTTP 400
    ├── AuditApiError          the audit source answered with an error
    │   ├── TransientApiError  429/5xx/timeouts/transient 403: retry (carries Retry-After when given)
    │   ├── PermanentApiError  retrying will not help
    │   │   ├── AuthenticationError  bad tenant, bad client id/secret/certificate (names the setting)
    │   │   ├── MissingPermissionError  the app lacks an API permission or role (names it)
    │   │   ├── RoutingError         the service could not route the call (Exchange's anchor mailbox)
    │   │   ├── AuditingDisabledError  unified auditing is turned off in the tenant (names the fix)
    │   │   └── QueryFailedError     the server reports the query failed or was cancelled
    │   └── NeedsSplitError    the window hit the source's result cap; split it and query again
    ├── SinkError              writing output failed
    └── SlotExpiredError       the lane's tenant budget slot ran out before a server-side step (no request sent)

Messages never contain secrets (client secrets, tokens, certificate material, SAS signatures).
``dooms_collection`` marks errors that will fail every chunk alike, so the orchestrator stops early.
"""

from __future__ import annotations

from typing import Any


class CollectorError(Exception):
    """Root of every error this app raises on purpose."""

    dooms_collection: bool = False
    """True when the same error will fail every other chunk too (credentials, permissions)."""

    kind: str = "error"
    """Stable short name carried across activity boundaries (JSON-friendly)."""


class ConfigError(CollectorError):
    kind = "config"
    dooms_collection = True

    def __init__(self, setting: str, rule: str) -> None:
        super().__init__(f"setting {setting}: {rule}")
        self.setting = setting
        self.rule = rule


class RequestValidationError(CollectorError):
    kind = "validation"

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


class AuditApiError(CollectorError):
    kind = "audit_api"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TransientApiError(AuditApiError):
    kind = "transient"

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class PermanentApiError(AuditApiError):
    kind = "permanent"


class AuthenticationError(PermanentApiError):
    kind = "authentication"
    dooms_collection = True


class MissingPermissionError(PermanentApiError):
    kind = "permission"
    dooms_collection = True

    def __init__(self, message: str, *, permission: str, status: int | None = None) -> None:
        super().__init__(message, status=status)
        self.permission = permission


class RoutingError(PermanentApiError):
    """The service refused how the call was routed (a wrong ``X-AnchorMailbox``); every chunk would fail alike."""

    kind = "routing"
    dooms_collection = True


AUDITING_FIX = (
    "Turn on auditing in the tenant: Microsoft Purview portal -> Audit -> select 'Start recording user and admin "
    "activity', or in Exchange Online PowerShell run Set-AdminAuditLogConfig -UnifiedAuditLogIngestionEnabled $true "
    "(needs the Exchange 'Audit Logs' role; a tenant that was never customized may need "
    "Enable-OrganizationCustomization first). The change can take up to 60 minutes to reach audit searches; records "
    "from before it were never recorded."
)
"""What to do about :class:`AuditingDisabledError` (learn.microsoft.com/purview/audit-log-enable-disable)."""


class AuditingDisabledError(PermanentApiError):
    """The tenant's unified audit log is turned off: the service refuses every audit query alike."""

    kind = "auditing_disabled"
    dooms_collection = True
    fix = AUDITING_FIX


class QueryFailedError(PermanentApiError):
    kind = "query_failed"


class NeedsSplitError(AuditApiError):
    """The window returned more records than the source can deliver in one query/session."""

    kind = "needs_split"

    def __init__(
        self,
        message: str,
        *,
        limit: int | None = None,
        reported_count: int | None = None,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.reported_count = reported_count
        self.evidence = evidence
        """What the reader saw before it asked for the split (Exchange: calls made, rows read), for the window."""


class SinkError(CollectorError):
    kind = "sink"


class SlotExpiredError(CollectorError):
    """The lane's tenant budget slot (its lease, as the orchestration last saw it) has run out: the activity sends
    no more requests, and the window asks the budget again before the lane goes on (``shared.budget.slot_deadline``)."""

    kind = "slot_expired"
