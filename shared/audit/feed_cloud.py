"""Which token audience the Management Activity API of each cloud takes.

The reference (office-365-management-activity-api-reference, "Activity API operations") gives one host per plan:
``manage.office.com`` (Enterprise), ``manage-gcc.office.com`` (GCC), ``manage.office365.us`` (GCC High) and
``manage.protection.apps.mil`` (DoD); its troubleshooting article requests tokens for the resource
``https://manage.office.com``, and a public client (rknightion/graph2otel, ``o365activityclient``) derives the
audience from the host the same way for every plan. A host none of these names (the local emulator, a proxy) keeps
the Enterprise audience.
"""

from __future__ import annotations

from urllib.parse import urlsplit

ENTERPRISE_AUDIENCE = "https://manage.office.com"
FEED_AUDIENCES = {
    "manage.office.com": ENTERPRISE_AUDIENCE,
    "manage-gcc.office.com": "https://manage-gcc.office.com",
    "manage.office365.us": "https://manage.office365.us",
    "manage.protection.apps.mil": "https://manage.protection.apps.mil",
}


def feed_scope(base_url: str) -> str:
    """The ``.default`` scope of the Management APIs for the cloud ``base_url`` is in."""
    host = (urlsplit(base_url).hostname or "").lower()
    return f"{FEED_AUDIENCES.get(host, ENTERPRISE_AUDIENCE)}/.default"
