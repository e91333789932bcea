"""The collection manifest: per-chunk entries (from the summary sidecars), failures, totals and a coverage check.

The manifest is the completeness proof of a collection: every instant of [start, end) is either inside a
collected chunk or inside a reported failure, and ``gaps`` lists anything that is neither. Only summaries inside the
collection's own windows count; any other object under its prefix is listed as ``foreign``.

``totals.malformed`` counts each quarantined record once: a record with a readable time is only ever quarantined in
its own window's chunk, and one without (``untimed``) is counted once by its key however many chunks received it.

A retry link's manifest also has a ``chain`` section, the same proof over its root's whole range across every link
of the retry chain (``activities.chain_manifest``). A pass over some windows of a larger range (a settle pass, a
follower's day) proves that range instead (``activities.manifest_scope``).
"""

from __future__ import annotations

import json
from datetime import datetime

from activities.chain_manifest import chain_section
from activities.manifest_scope import latency_section, provisional_summaries, reconciled_section, scope_of
from activities.manifest_windows import coverage_gaps, drop_superseded, load_summaries, split_foreign
from shared import names
from shared.fixes import with_fix
from shared.models import Chunk, ChunkSummary, JsonDict, parse_iso
from shared.records.rules import quarantine_key
from shared.sinks.base import ChunkSink, write_bytes
from shared.sources.registry import manifest_sections
from shared.timeline.latency import latency_report, provisional_parts, started_at_of
from shared.timeline.retention import possibly_partial, retention_report


def untimed_keys(sink: ChunkSink, summaries: list[ChunkSummary]) -> set[str]:
    """Keys of the quarantined records without a readable time, across the chunks that have any."""
    keys: set[str] = set()
    for summary in summaries:
        if not summary.untimed or summary.quarantine_blob is None:
            continue
        for line in (sink.read_bytes(summary.quarantine_blob) or b"").splitlines():
            entry = json.loads(line)
            if entry.get("createdDateTime") is None:
                keys.add(quarantine_key(entry.get("id"), str(entry["raw"])))
    return keys


def _moment(value: object) -> datetime | None:
    try:
        return parse_iso(value) if isinstance(value, str) else None
    except ValueError:
        return None


def write_manifest(sink: ChunkSink, payload: JsonDict) -> JsonDict:
    """Build and write the manifest; returns its name, location, hash and headline totals."""
    tenant, collection = str(payload["tenantId"]), str(payload["collectionId"])
    prefix = names.collection_prefix(tenant, collection)
    scope = scope_of(payload)
    ranges = [(parse_iso(r["start"]), parse_iso(r["end"])) for r in payload.get("ranges") or []]
    if scope is not None:
        ranges = [(c.start, c.end) for c in scope.ranges]
    range_chunks = [Chunk(s, e) for s, e in ranges]
    own, foreign = split_foreign(load_summaries(sink, prefix), ranges)
    summaries, superseded = drop_superseded(own)
    failures = list(payload.get("failures") or []) + (scope.failures if scope is not None else [])
    failed_chunks = [Chunk.from_json(f["chunk"]) for f in failures]
    gaps = [
        gap.to_json()
        for start, end in ranges
        for gap in coverage_gaps(start, end, [s.chunk for s in summaries if s.chunk.start < end] + failed_chunks)
    ]
    untimed = len(untimed_keys(sink, summaries))
    started_at = started_at_of(payload)
    if scope is None:
        late = provisional_parts(range_chunks, started_at) if started_at else []
        flagged = [s for s in summaries if any(p.start < s.chunk.end and s.chunk.start < p.end for p in late)]
        latency = latency_report(range_chunks, started_at)
    else:
        flagged = provisional_summaries(summaries, scope, payload, started_at)
        latency = latency_section(flagged)
    provisional = {s.blob for s in flagged}
    # Every query ran before the collection finished: the guaranteed retention is judged at that latest moment.
    finished_at = _moment(payload.get("finishedAt")) or started_at
    retention_days = int(payload.get("retentionDays") or 0)
    old = possibly_partial(range_chunks, finished_at, retention_days) if finished_at else []
    partial = {s.blob for s in summaries if any(p.start < s.chunk.end and s.chunk.start < p.end for p in old)}
    totals = {
        "chunks": len(summaries),
        "records": sum(s.records for s in summaries),
        "trimmed": sum(s.trimmed for s in summaries),
        "filteredOut": sum(s.filtered_out for s in summaries),
        "duplicates": sum(s.duplicates for s in summaries),
        "malformed": sum(s.malformed - s.untimed for s in summaries) + untimed,
        "untimed": untimed,
        "bytes": sum(s.bytes for s in summaries),
        "incompleteChunks": sum(1 for s in summaries if s.incomplete),
        "failedChunks": len(failures),
        "provisionalChunks": len(provisional),
        "possiblyPartialChunks": len(partial),
        "late": sum(s.late for s in summaries),
    }
    manifest = {
        "collectionId": collection,
        "tenantId": tenant,
        "parentCollectionId": payload.get("parentCollectionId"),
        "source": payload.get("source"),
        "filters": payload.get("filters") or {},
        "ranges": [c.span_json() for c in range_chunks],
        "status": payload.get("status"),
        "reason": with_fix(payload["reason"]) if isinstance(payload.get("reason"), dict) else payload.get("reason"),
        "timings": {"startedAt": payload.get("startedAt"), "finishedAt": payload.get("finishedAt")},
        "totals": totals,
        "gaps": gaps,
        "latency": latency,
        "retention": retention_report(range_chunks, finished_at, retention_days),
        "chunks": [
            {
                **s.to_json(),
                "source": s.source,
                "splits": s.chunk.depth,
                "location": sink.location(s.blob),
                "provisional": s.blob in provisional,
                "possiblyPartial": s.blob in partial,
            }
            for s in summaries
        ],
        "failures": failures,
        "superseded": [s.blob for s in superseded],
        "foreign": [s.blob for s in foreign],
        "options": {"highCompleteness": bool(payload.get("highCompleteness", False))},
        # each source's fields (which filters each record was checked against, what became of Graph's queries,
        # what Exchange's calls cost), None where they are not the collection's source's
        **manifest_sections(payload),
        "incompleteWindows": [
            {"window": s.chunk.span_json(), "reasons": s.incomplete_reasons} for s in summaries if s.incomplete
        ],
    }
    if scope is not None and scope.sampled is not None:  # a follower reading the feed: its reconcile's counts
        manifest["reconciled"] = reconciled_section(summaries, scope.sampled)
    if payload.get("cancelled") is not None:  # written by POST .../cancel: when, and what was still running then
        manifest["cancelled"] = payload["cancelled"]
    written: JsonDict = {"totals": totals, "gaps": gaps}
    request = payload.get("request")
    if scope is not None or (isinstance(request, dict) and request.get("settle")):
        # What a settle pass reads again, and what a follower keeps track of: the provisional windows as written.
        written["provisionalWindows"] = [s.chunk.to_json() for s in flagged]
    if payload.get("parentCollectionId"):  # a retry link: the proof over its chain's whole range too
        chain = chain_section(sink, payload, own)  # this link's summaries, already read
        manifest["chain"] = chain.section
        if chain.section is None:
            manifest["chainReason"] = chain.reason
        written["chain"] = chain.headline()
    name = names.manifest_object_name(tenant, collection)
    stored = write_bytes(sink, name, json.dumps(manifest, indent=2, sort_keys=True).encode())
    return {"manifest": name, "location": sink.location(name), "sha256": stored.sha256, **written}
