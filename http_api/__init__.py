"""The HTTP API: starters, status, cancel, retry-failed, follows, doctor and the live pages (function auth level), and
the timer that purges followers' finished passes (``follow_purge``).

Thin triggers (``collections``, ``follows``, ``doctor``, ``view``) over plain async functions (``service``,
``follow_service``, ``retry_chain``, ``cancel``) and code only the API runs: request JSON parsing (``request_json``),
the follows request rules (``follow_request``), the plan report, the live page's grid (``grid_cells``).

May import: shared.*, activities, orchestrators.
"""
