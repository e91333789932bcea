"""``doctor``: a read-only preflight of the collector's settings, credentials, permissions and output store against
a real tenant, reporting one result per probe (``shared.doctor.model``). Used by ``python -m collector_local doctor``
and ``GET /api/doctor``.

May import: shared, shared.audit, shared.hosting, shared.records, shared.requests, shared.sinks, shared.sources.
"""

from __future__ import annotations

from shared.doctor.model import DoctorReport, Outcome, ProbeResult
from shared.doctor.runner import DEFAULT_BUDGET_SECONDS, run_doctor
from shared.doctor.sources import SOURCES

__all__ = ["DEFAULT_BUDGET_SECONDS", "SOURCES", "DoctorReport", "Outcome", "ProbeResult", "run_doctor"]
