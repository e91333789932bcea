"""The feed source: the Office 365 Management Activity API, the audit feed every SIEM connector reads, read chunk by
chunk by publication time.

``source`` (request rules, options, plan report, manifest fields), ``lanes`` (a chunk's calls in the window),
``calls`` (its activity's typed input and result, the cursor a lane carries, the evidence each content type leaves).
The adapter is ``shared.audit.feed`` (with its ``feed_*`` modules), the activity ``activities.feed`` over
``activities.feed_reads``, the doctor's probes ``shared.doctor.feed_probe``.
"""

from __future__ import annotations

from shared.sources.feed.source import FeedSource

__all__ = ["FeedSource"]
