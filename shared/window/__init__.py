"""The collection's sliding window: a pure state machine the collection orchestrator drives (``orchestrators.collect``).

``machine`` (``CollectionWindow``: which chunk lanes run and what each does next, for any source), ``lanes`` (what
the window asks of the collection's source, and what it offers the source's lanes: two protocols the sources of
``shared.sources`` implement), ``budget`` (``LaneBudget``: the tenant budget's slots, an object the window holds,
over ``budget_calls``: the entity protocol, ``budget_keep``: the slots it holds, hands on, renews and gives back,
``budget_credits``: the daily Graph quota's credits, ``budget_host``: the window as they see it), ``calls``
(``ChunkCall``: what every chunk activity is given), ``state`` (its carried state, lanes and the steps it asks for),
``progress_grid`` (what the window publishes for the live page). Orchestrator code: deterministic, no I/O,
no clock. Nothing here names a source.

May import: shared, shared.audit, shared.budget, shared.requests, shared.timeline, shared.values.
"""
