"""The tenant-wide audit-API budget: at most B calls in flight per (tenant, source), across every collection.

``machine`` (the budget as a pure state machine, run by ``orchestrators.budget_entity``), ``wire`` (what crosses the
wire to and from the entity), ``token`` (the per-collection token), ``slot`` (a slot as the window knows it),
``slot_deadline`` (a slot as an activity sees it: no request once its lease has run out).

May import: shared.
"""
