"""Following a tenant: the pure half of the follower orchestrator (``orchestrators.follow``).

``state`` (what a follower is and carries from cycle to cycle), ``plan`` (which passes to run now, what their outcome
changes, when to wake next). The follows API's request rules live in ``http_api.follow_request``.

May import: shared, shared.requests, shared.timeline.
"""
