"""The local durable engine: the Durable Task Framework's Azure Storage backend re-implemented in Python.

``sessions`` (the session manager of the seed, its control queues, dedupe and partitioning), ``dispatch`` (the
orchestration and activity dispatchers), ``replay`` (one episode through the real SDK replay executor), ``entities``,
``storage`` (queues and tracking tables, in memory or SQLite), ``host`` (a local Functions host with the Durable HTTP
management API), ``engine`` (the facade, ``engine_api`` its contract). It knows nothing of the collector: it hosts
any Python v2-model function app, and is never deployed (``.funcignore``).

May import: nothing outside itself.
"""
