"""What a collection is asked to do: the request rules, and the input its orchestration starts with.

``validation`` (``POST /api/collections`` bodies: a pure function that names the field and the rule it broke),
``source_rules`` (what the rules ask of a source: ``shared.sources`` implements it), ``run_options`` (per-collection
knobs, fixed at start), ``collection_spec`` (the fixed part of the orchestration input). Used by the HTTP API, the
local CLI, the follower and the window.

May import: shared, shared.audit, shared.budget, shared.timeline, shared.values.
"""
