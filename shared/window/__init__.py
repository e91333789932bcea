"""The collection's sliding window: a pure state machine the collection orchestrator drives (``orchestrators.collect``).

``machine`` (``CollectionWindow``: which chunk lanes run and what each does next), ``state`` (its options, carried
state, lanes and the steps it asks for), ``budget_lanes`` and ``exchange_lanes`` (mixins: the tenant budget's slots,
Exchange lanes sized and learning), ``sizing`` (Exchange windows from the tenant's density), ``chunk_rules`` (what a
Graph query's status means for its chunk; the activity applies the same rule), ``progress_grid`` (what the window
publishes for the live page). Orchestrator code: deterministic, no I/O, no clock.

May import: shared, shared.audit, shared.budget, shared.requests, shared.timeline.
"""
