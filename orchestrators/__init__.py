"""The orchestrators and entities: deterministic code that decides, never does I/O.

``collect`` (a collection: drives ``shared.window``), ``settle`` (a collection's provisional windows read again),
``follow`` (the eternal follower), ``budget_entity`` (the tenant budget), ``chain_claim_entity`` (the retry chain).
Only ``context.current_utc_datetime``, ``context.new_uuid()`` and durable timers; no clock, I/O or environment.

May import: shared.*, activities.
"""
