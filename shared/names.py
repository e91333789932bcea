"""Function names and deterministic, safe object names for the collector.

Function names are the contract between triggers, the orchestrator and the HTTP API, so they live in one place.
Object names are derived only from validated components (tenant, collection id, window), so a retried activity
writes to exactly the same object (overwrite = exactly-once output) and no request can steer a path.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

# --- Function names (registered by the blueprints; used by call_activity / start_new) ---------------------------
ORCHESTRATOR_COLLECT = "collect_orchestrator"
ORCHESTRATOR_FOLLOW = "follow_orchestrator"
"""A follower: one eternal orchestration per (tenant, source, filters), collections of due windows as passes."""
ACTIVITY_GRAPH_SUBMIT = "graph_submit_activity"
ACTIVITY_GRAPH_COLLECT = "graph_collect_activity"
"""Checks a Graph query and, once it is finished (and needs no split), exports it in the same call."""
ACTIVITY_GRAPH_DELETE = "graph_delete_activity"
ACTIVITY_EXCHANGE_COLLECT = "exchange_collect_activity"
ACTIVITY_FINALIZE = "finalize_activity"
ACTIVITY_ADMIT = "admit_activity"
"""Checks an execution's input seal and derives its run's budget token (``shared.requests.admission``)."""
ACTIVITY_SEAL = "seal_activity"
"""Seals an input an orchestration hands on (continue-as-new, a settle or follower pass)."""
ENTITY_BUDGET = "tenant_budget"
ENTITY_START_CLAIM = "start_claim"
"""Hands out each start once (key: a collection id, the root of its retry chain, or a follower id): the root's own
start is generation 0, each retry link the next generation (``shared.chain_claim``)."""
HTTP_START = "collections_start"
HTTP_SUMMARY = "collections_summary"
HTTP_RETRY_FAILED = "collections_retry_failed"

# --- Safe components -------------------------------------------------------------------------------------------
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_SAFE_TENANT = re.compile(r"^[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?$")
_STAMP = "%Y%m%dT%H%M%SZ"


def is_safe_id(value: str) -> bool:
    """True for ids usable as instance ids and path components: letters, digits, ``-``, ``_``; 1..64 chars."""
    return bool(_SAFE_ID.fullmatch(value))


_RETRY_SUFFIX = re.compile(r"-retry-[0-9]+$")
_RETRY_ROOT_MAX = 48


def retry_collection_id(root_id: str, generation: int) -> str:
    """The id of retry number ``generation`` (1, 2, ...) in the chain that starts at collection ``root_id``.

    Deterministic, so concurrent ``retry-failed`` calls all name the same instance and the Durable start refuses
    every one but the first (``overridableExistingInstanceStates: NonRunningStates``). A long root id is shortened
    with a hash of itself so the result stays a valid id (at most 64 characters).
    """
    if not is_safe_id(root_id) or generation < 1:
        raise ValueError(f"no retry id for {root_id!r} generation {generation}")
    root = root_id
    if len(root) > _RETRY_ROOT_MAX:
        root = f"{root[:39]}-{hashlib.sha256(root.encode()).hexdigest()[:8]}"
    retry_id = f"{root}-retry-{generation}"
    if not is_safe_id(retry_id):
        raise ValueError(f"retry generation {generation} is too large")
    return retry_id


def is_retry_id(collection_id: str) -> bool:
    """Ids ending in ``-retry-<n>`` are reserved for the retry chain (a request may not choose one)."""
    return bool(_RETRY_SUFFIX.search(collection_id))


def tenant_component(tenant_id: str) -> str:
    """The tenant as names use it: lower case, ASCII only, a DNS name or GUID; ``ValueError`` otherwise."""
    # ASCII before case folding (U+212A KELVIN SIGN lowers to "k"), and no stripping: a tenant is used exactly as
    # validated or refused, never quietly turned into another one.
    tenant = tenant_id.lower() if tenant_id.isascii() else ""
    if not _SAFE_TENANT.fullmatch(tenant) or ".." in tenant:
        raise ValueError(f"unsafe tenant id for an object name: {tenant_id!r}")
    return tenant


def _id_component(collection_id: str) -> str:
    if not is_safe_id(collection_id):
        raise ValueError(f"unsafe collection id for an object name: {collection_id!r}")
    return collection_id


def _stamp(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("object-name timestamps must be timezone-aware")
    return moment.astimezone(UTC).strftime(_STAMP) + (f"{moment.microsecond:06d}" if moment.microsecond else "")


def collection_prefix(tenant_id: str, collection_id: str) -> str:
    """``<tenant>/<collection>/``: every object of one collection lives under it."""
    return f"{tenant_component(tenant_id)}/{_id_component(collection_id)}/"


def cancel_marker_name(tenant_id: str, collection_id: str) -> str:
    """``<tenant>/<collection>/cancel-requested.json``: written by the cancel route before it terminates the
    collection, so that its waiting Graph checks stop waiting (``activities.graph_waits``)."""
    return f"{collection_prefix(tenant_id, collection_id)}cancel-requested.json"


def chunk_object_name(tenant_id: str, collection_id: str, start: datetime, end: datetime) -> str:
    """The JSONL object of one chunk window; identical for every attempt at the same window."""
    if end <= start:
        raise ValueError("chunk window end must be after start")
    return f"{collection_prefix(tenant_id, collection_id)}chunks/{_stamp(start)}_{_stamp(end)}.jsonl"


_SUMMARY_NAME = re.compile(r"/chunks/([0-9]{8}T[0-9]{6}Z)([0-9]{6})?_([0-9]{8}T[0-9]{6}Z)([0-9]{6})?\.summary\.json$")


def summary_window(name: str) -> tuple[datetime, datetime] | None:
    """The window [start, end) a chunk's summary sidecar is named by (``summary_object_name``); None for any other
    name. Read from the name alone, so listing a prefix tells which windows were finished without reading them."""
    found = _SUMMARY_NAME.search(name)
    if found is None:
        return None

    def moment(stamp: str, micros: str | None) -> datetime:
        return datetime.strptime(stamp, _STAMP).replace(tzinfo=UTC, microsecond=int(micros or 0))

    start, end = moment(found[1], found[2]), moment(found[3], found[4])
    return (start, end) if start < end else None


def quarantine_object_name(chunk_name: str) -> str:
    """Malformed records of a chunk, next to it."""
    return chunk_name.removesuffix(".jsonl") + ".quarantine.jsonl"


def summary_object_name(chunk_name: str) -> str:
    """The small sidecar with the chunk's summary (what the manifest is built from)."""
    return chunk_name.removesuffix(".jsonl") + ".summary.json"


def parts_prefix(tenant_id: str, collection_id: str) -> str:
    """``<tenant>/<collection>/parts/``: records of work in progress (a chunk's parts until their commit, what its
    submits created), removed once the manifest is written."""
    return f"{collection_prefix(tenant_id, collection_id)}parts/"


def part_record_name(chunk_name: str, key: str) -> str:
    """The record of one part of a chunk object (its ids, counts and the call's outcome), under ``parts/``."""
    head, sep, file = chunk_name.rpartition("/chunks/")
    if not sep or not file.endswith(".jsonl") or not key.isalnum():
        raise ValueError(f"not a chunk object name or part key: {chunk_name!r}, {key!r}")
    return f"{head}/parts/{file.removesuffix('.jsonl')}/{key}.json"


def query_record_name(chunk_name: str) -> str:
    """What a Graph chunk's submits created (the query id), under ``parts/``: read before any create."""
    head, sep, file = chunk_name.rpartition("/chunks/")
    if not sep or not file.endswith(".jsonl"):
        raise ValueError(f"not a chunk object name: {chunk_name!r}")
    return f"{head}/parts/{file.removesuffix('.jsonl')}/query.json"


def manifest_object_name(tenant_id: str, collection_id: str) -> str:
    return f"{collection_prefix(tenant_id, collection_id)}manifest.json"
