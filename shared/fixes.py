"""What to do about each kind of failure, in the operator's terms: one table for the summary, the live page and the
manifest (docs/troubleshooting.md, per failure kind)."""

from __future__ import annotations

from shared.errors import AUDITING_FIX
from shared.models import JsonDict

FIXES = {
    "authentication": "Check AUDIT_CLIENT_ID, AUDIT_CLIENT_SECRET or the certificate settings and the tenant (the "
    "message names the setting), then retry the failed chunks.",
    "permission": "Grant the app AuditLogsQuery.Read.All (Graph) or Exchange.ManageAsApp and an audit role "
    "(Exchange) with admin consent, then retry the failed chunks.",
    "auditing_disabled": AUDITING_FIX + " Then retry the failed chunks (they include those never started).",
    "config": "A setting is missing or invalid (the message names it); fix it, then retry the failed chunks.",
    "transient": "The audit service kept throttling or failing: lower maxConcurrency or retry the failed chunks later.",
    "query_failed": "The audit service ended the query: retry the failed chunks.",
    "poll_timeout": "The audit query did not finish in time: retry the failed chunks later.",
    "needs_split": "The smallest window is still over the source's cap: narrow the filters or lower "
    "COLLECTOR_MIN_SPLIT_SECONDS.",
    "sink": "Writing the output failed: check the OUTPUT_STORAGE_* settings and the storage account's access, then "
    "retry the failed chunks.",
    "activity_crashed": "A worker failed unexpectedly: see the function logs, then retry the failed chunks.",
    "permanent": "The audit service refused the request (see the reason): fix its cause, then retry the failed chunks.",
}


def with_fix(failure: JsonDict) -> JsonDict:
    """The failure (a JSON object with ``kind``) with its ``fix`` added when the kind has one and it has none."""
    fix = failure.get("fix") or FIXES.get(str(failure.get("kind")))
    return {**failure, "fix": fix} if fix else failure
