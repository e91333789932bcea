"""Durable entities on the local engine, as the Durable extension 2.x runs them on the Azure Storage backend.

* ``ids``       — ``@name@key`` instance ids.
* ``messages``  — request / response / release messages (the extension's JSON).
* ``sorter``    — in-order, de-duplicated delivery of requests per sender (``MessageSorter``).
* ``state``     — the scheduler state persisted between batches, and the entity status.
* ``batch``     — the batch request/result JSON exchanged with the entity function (out-of-proc protocol).
* ``scheduler`` — one batch: messages in, operations run, responses and signals out.
* ``episode``   — the work item of an entity instance, with the same contract as an orchestration episode.
* ``client``    — signal, read state and list entities (the entity client and the HTTP API).

``docs/local-host.md`` ("Entities") lists what is supported and the upstream sources.
"""
