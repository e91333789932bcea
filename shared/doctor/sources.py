"""Each source's doctor: its probes in report order and how they run, one line per source (``DOCTORS``).

A run probes the settings and the output store, then each chosen source's ``begin`` in order (Graph creates its tiny
query first, so the service works on it while the other sources are probed), then the ``tenant`` probe from what
every source's sign-in met (and their own later steps: Exchange's role), then each source's ``end``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from shared.audit.config import AuditApiConfig
from shared.doctor.exchange_probe import EXCHANGE_PROBES, exchange_doctor
from shared.doctor.feed_probe import FEED_PROBES, feed_doctor
from shared.doctor.graph_probe import GRAPH_PROBES, graph_doctor
from shared.doctor.model import Budget, ProbeResult
from shared.doctor.tenant_probe import TokenOutcome

ALL = "all"


class SourceDoctor(Protocol):
    """One source's probes for one run."""

    @property
    def results(self) -> dict[str, ProbeResult]: ...

    def begin(self) -> None:
        """Its probes before the tenant probe."""
        ...

    def end(self) -> None:
        """Its probes after it (clean-up included)."""
        ...

    def sign_in(self) -> TokenOutcome | None:
        """What its token probe met (None when it was skipped)."""
        ...

    def tenant_step(self, client_id: str, states: list[str]) -> ProbeResult | None:
        """Its own tenant step after admin consent (``shared.doctor.tenant_probe.TenantStep``)."""
        ...


Build = Callable[[AuditApiConfig, Budget, Callable[[], datetime], Callable[[float], None]], SourceDoctor]
"""A source's doctor for one run: ``build(config, budget, now, sleep)`` (each probe module has its own)."""


@dataclass(frozen=True, slots=True)
class Doctor:
    name: str
    """The source's name (``shared.sources``)."""
    probes: tuple[str, ...]
    build: Build


DOCTORS: tuple[Doctor, ...] = (
    Doctor("graph", GRAPH_PROBES, graph_doctor),
    Doctor("exchange", EXCHANGE_PROBES, exchange_doctor),
    Doctor("feed", FEED_PROBES, feed_doctor),
)

COMMON_PROBES = ("settings", "tenant", "storage")
PROBE_ORDER = COMMON_PROBES + tuple(probe for doctor in DOCTORS for probe in doctor.probes)
"""Every probe, in the order results are reported (they may run in another order)."""
SOURCES = (*(doctor.name for doctor in DOCTORS), ALL)
"""What ``--source`` / ``source`` may name: one source, or all of them."""


def chosen(source: str) -> tuple[Doctor, ...]:
    """The doctors a run of ``source`` probes (every one for ``all``)."""
    return tuple(doctor for doctor in DOCTORS if source in (doctor.name, ALL))
