"""The Graph source: Microsoft Graph audit log queries (``/security/auditLog/queries``), one query per chunk.

``source`` (request rules, options, plan report, manifest fields), ``lanes`` (a chunk's phases in the window),
``calls`` (its activities' typed inputs and results), ``query_rules`` (what a query's status means, shared by the
activity and the window). The adapter is ``shared.audit.graph``, the activities ``activities.graph``, the doctor's
probes ``shared.doctor.graph_probe``.
"""

from __future__ import annotations

from shared.sources.graph.source import GraphSource

__all__ = ["GraphSource"]
