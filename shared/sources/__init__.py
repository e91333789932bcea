"""The audit sources, one object each: what differs between the Graph audit query API, Exchange's
``Search-UnifiedAuditLog`` (and any source added after them) lives in the source's own files, and the rest of the app
asks the source rather than deciding by its name.

``base`` (the ``Source`` protocol and its defaults), ``registry`` (every source by name: one line each; the window of
a collection, the request rules with every source's, the sections every status, plan and manifest carries), and one
subpackage per source (``graph``, ``exchange``): its request rules and reports (``source``), its lanes in the window
(``lanes``), its activities' typed inputs and results (``calls``). ``docs/architecture.md`` says how to add one.

May import: shared, shared.audit, shared.budget, shared.requests, shared.timeline, shared.values, shared.window.
"""
