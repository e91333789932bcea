"""Audit records on the write path: rules, the id set, the JSON codec and prefetch.

``rules`` (record time, trimming to a window, de-duplication by id, quarantine of malformed records), ``id_set``
(a compact exact set of record ids), ``json_codec`` (the same bytes with or without orjson), ``prefetch`` (the next
page fetched while this one is written).

May import: shared.values.
"""
