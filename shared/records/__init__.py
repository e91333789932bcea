"""Audit records on the write path: rules, the id set, the JSON codec and prefetch.

``rules`` (record time, trimming to a window, de-duplication by id, quarantine of malformed records), ``id_set`` and
``id_buckets`` (compact exact sets of record ids), ``json_codec`` (the same bytes with or without orjson),
``prefetch`` (the next page fetched while this one is written; the bench's comparison only).

May import: shared.values.
"""
