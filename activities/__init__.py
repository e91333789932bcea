"""The activity functions: the only triggers that do I/O against an audit API and the output store.

Thin triggers (``graph``, ``exchange``, ``finalize``) over pure bodies (``bodies``, ``exchange_calls``,
``chunk_writer``, ``chunk_parts``, ``reread``) that take their ports from ``runtime`` (built once per worker from the
settings). The manifest (``manifest``, over ``manifest_windows``; ``chain_manifest`` and ``manifest_scope`` for retry
chains and scoped passes) is the collection's completeness proof.

May import: shared.*.
"""
