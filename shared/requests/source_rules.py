"""What the request rules ask of a source: a protocol, so the rules stay the same for every source.

``shared.sources`` implements it (one object per source, found by name in its registry) and the starters hand the
registry to the rules (``shared.requests.validation``); the rules never name a source themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from shared.settings import Settings
from shared.values import AuditFilters


class SourceRules(Protocol):
    """A source's part of the request rules; each check raises ``InvalidRequest`` naming the field and the rule."""

    @property
    def name(self) -> str:
        """The ``source`` a request names it by."""
        ...

    @property
    def high_completeness(self) -> bool:
        """Whether the source has a ``highCompleteness`` option."""
        ...

    def default_interval_minutes(self, settings: Settings) -> int:
        """The chunk length of a request that names none (before the configured bounds)."""
        ...

    def check_range(self, start: datetime, now: datetime, settings: Settings) -> None:
        """How far back the source can read (``startDate``)."""
        ...

    def check_tenant(self, tenant_id: str) -> None:
        """The tenant forms the source can address (``tenantId``)."""
        ...

    def check_cloud(self, settings: Settings) -> None:
        """The source exists in the cloud the settings' endpoints are in (``source``)."""
        ...

    def check_filters(self, filters: AuditFilters) -> None:
        """The filters the source can apply (``filters.<name>``)."""
        ...


SourceCatalog = Mapping[str, SourceRules]
"""Every source by its name (``shared.sources.registry.SOURCES``)."""
