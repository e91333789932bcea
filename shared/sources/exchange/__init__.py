"""The Exchange source: ``Search-UnifiedAuditLog`` through Exchange Online's ``InvokeCommand``, read call by call.

``source`` (request rules, manifest fields), ``lanes`` (a chunk's calls in the window, the windows sized before they
start), ``sizing`` (the tenant's density as learned), ``calls`` (its activity's typed input and result). The adapter
is ``shared.audit.exchange`` (with ``exchange_session`` and ``exchange_evidence``), the activity
``activities.exchange`` over ``activities.exchange_calls``, the doctor's probes ``shared.doctor.exchange_probe``.
"""

from __future__ import annotations

from shared.sources.exchange.source import ExchangeSource

__all__ = ["ExchangeSource"]
