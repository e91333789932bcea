"""The collector's core: everything its triggers, orchestrators and activities share, as typed functions and values.

The top-level modules are the vocabulary every part speaks: ``errors`` (the error tree), ``models`` (values that cross
function boundaries), ``names`` (function and object names), ``settings`` (the one settings object, built at the
edge), ``clock``, ``log_fields`` (structured log events), ``redact``, ``fixes`` (what to do about each failure) and
``chain_claim`` (who starts the next link of a retry chain). Each subpackage owns one concern:

* ``values``: the value types every layer shares (time window, filters, records), importing nothing of the project.
* ``audit``: the audit-source ports and their Graph, Exchange and feed adapters (the only code that calls the audit
  APIs).
* ``sources``: the audit sources, one object each (request rules, options, budget, lanes, reports), by name.
* ``window``: the collection's sliding window, the pure state machine the orchestrator drives for any source.
* ``timeline``: cutting a range into chunk windows, and what a window may still lack (late arrivals, retention).
* ``budget``: the tenant-wide audit-API budget: its state machine, its wire format, a lane's slot.
* ``records``: record rules (time, trimming, de-duplication, quarantine), the id set, the JSON codec, prefetch.
* ``requests``: what a collection is asked to do: validation, run options, the orchestration's fixed input.
* ``follow``: a follower's plan and state (the follower orchestrator's pure half).
* ``hosting``: where the app runs, what Azure must set, the SDK speed-up.
* ``sinks``: the output port and its blob, folder and memory stores. ``doctor``: the preflight probes.

Nothing here imports the triggers (``activities``, ``orchestrators``, ``http_api``) or the local-only packages.

May import: shared.budget, shared.hosting, shared.values.
"""
