"""A chunk object written in parts by several activities (Exchange: one part per InvokeCommand call).

Each part goes through the same record rules as a whole chunk (``activities.chunk_writer.ChunkRecords``: trimmed to the
window, repeats removed, malformed records quarantined once, in their own window) and the commit joins the parts,
in the order the lane lists them, into the chunk's object. Exactly-once output under at-least-once activities:

* **Repeats across parts** are removed by record id: a part is written against the ids of every part before it,
  read from those parts' records (``shared.records.id_set``: 16 bytes per GUID id), cached in this process as one
  compact set and read again from storage on a miss (the activities of one lane may run in different worker processes).
* **A part's activity run twice** (crash points C2/C8/C9) finds its part's record and returns the recorded outcome
  instead of reading the source again, so the part and the session position the lane carries stay consistent.
* **Part keys are per call**: a lane gives every call a new key (retries included), so a run whose result the lane
  never saw writes a part the commit does not list.
* **The commit is idempotent**: the summary sidecar, written last, names the parts it committed and their hashes; a
  commit run again for the same parts returns it. SHA-256, size and counts are those of the committed object.
* **A window read again** (a settle pass, a follower's re-read: ``activities.reread``) writes parts under the same
  keys as the read before it; its commit is told apart from a re-run by the parts' hashes, replaces the object only
  when a part differs, and counts the records it gained as ``late``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from activities.chunk_writer import ChunkRecords, _dumps, _quarantine_line
from activities.reread import with_late
from shared import names
from shared.audit.ports import MalformedRecord, RecordPage
from shared.errors import SinkError
from shared.models import Chunk, ChunkSummary, JsonDict, iso, parse_iso
from shared.records.id_set import IdSet, guid_key
from shared.records.rules import Deduplicator, Quarantine
from shared.sinks.base import ChunkSink, write_bytes

logger = logging.getLogger(__name__)


def part_key(call: int) -> str:
    """The key of the part a lane's call number ``call`` writes (fixed width: block ids must have one length)."""
    if call < 0:
        raise ValueError("call numbers start at 0")
    return f"{call:05d}"


# --- one part's record -----------------------------------------------------------------------------------------
def _malformed_json(record: MalformedRecord) -> JsonDict:
    created = iso(record.created) if record.created is not None else None
    return {"raw": record.raw, "reason": record.reason, "id": record.record_id, "created": created}


def _malformed_from(data: JsonDict) -> MalformedRecord:
    created = data.get("created")
    moment = parse_iso(created) if created else None
    return MalformedRecord(str(data["raw"]), str(data["reason"]), data.get("id"), moment)


@dataclass
class PartRecord:
    """What one part holds: counts, its record ids, its malformed records (not yet settled), the call's outcome."""

    key: str
    records: int
    trimmed: int
    duplicates: int
    id_bytes: bytes
    """The part's record ids (``IdSet.to_bytes``)."""
    malformed: list[MalformedRecord] = field(default_factory=list)
    outcome: JsonDict = field(default_factory=dict)
    """What the call returned to the lane (the session position after it): returned again when the call reruns."""
    sha256: str | None = None
    """Of the part's staged bytes: a commit of the same keys with other bytes is a new read, not a re-run."""

    def to_json(self) -> JsonDict:
        return {
            "sha256": self.sha256,
            "key": self.key,
            "records": self.records,
            "trimmed": self.trimmed,
            "duplicates": self.duplicates,
            "ids": base64.b64encode(self.id_bytes).decode(),
            "malformed": [_malformed_json(m) for m in self.malformed],
            "outcome": self.outcome,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> PartRecord:
        return cls(
            key=str(data["key"]),
            records=int(data["records"]),
            trimmed=int(data["trimmed"]),
            duplicates=int(data["duplicates"]),
            id_bytes=base64.b64decode(data["ids"]),
            malformed=[_malformed_from(m) for m in data.get("malformed") or ()],
            outcome=dict(data.get("outcome") or {}),
            sha256=data.get("sha256"),
        )


class _AfterParts(Deduplicator):
    """This part's ids, with every id of the parts before it counted as already seen."""

    def __init__(self, prior: IdSet) -> None:
        super().__init__()
        self._prior = prior
        self.repeats = 0
        """Records of this part that an earlier part already held (not counting repeats within this part)."""

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._prior or super().__contains__(record_id)

    def add(self, record_id: str) -> bool:
        key = guid_key(record_id)
        if key is None:
            if record_id in self._prior:
                self.repeats += 1
                return False
            return super().add(record_id)
        if self._prior.has_key(key):
            self.repeats += 1
            return False
        return self.add_key(key)

    def add_many(self, ids: Sequence[str]) -> list[bool]:
        """``add`` for a page of ids: the ones an earlier part holds are looked up as one batch, then the rest added."""
        earlier = self._prior.contains_many(ids)
        if not any(earlier):
            return super().add_many(ids)
        self.repeats += sum(earlier)
        fresh = iter(super().add_many([record_id for record_id, held in zip(ids, earlier) if not held]))
        return [False if held else next(fresh) for held in earlier]


class _IdCache:
    """Per chunk object, the ids of the parts a lane listed last, so its next call need not read them back.

    An entry also names the read it belongs to (``epoch``: the hash of the window's object when that read began,
    None for a first read): a later pass reading the window again writes parts under the same keys, and a worker
    that cached the earlier read's ids must not take them for this read's.
    """

    def __init__(self, size: int = 32) -> None:
        self._entries: OrderedDict[str, tuple[tuple[str, ...], str | None, IdSet]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, name: str, keys: Sequence[str], epoch: str | None = None) -> IdSet | None:
        """The ids of the parts ``keys`` of the read ``epoch`` when cached; the caller must not change the set."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None or entry[0] != tuple(keys) or entry[1] != epoch:
                return None
            self._entries.move_to_end(name)
            return entry[2]

    def put(self, name: str, keys: Sequence[str], ids: IdSet, epoch: str | None = None) -> None:
        with self._lock:
            self._entries[name] = (tuple(keys), epoch, ids)
            self._entries.move_to_end(name)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


ID_CACHE = _IdCache()


class ChunkParts:
    """The parts of one chunk object in one sink."""

    def __init__(self, sink: ChunkSink, *, tenant_id: str, collection_id: str, chunk: Chunk) -> None:
        self.sink = sink
        self.chunk = chunk
        self.name = names.chunk_object_name(tenant_id, collection_id, chunk.start, chunk.end)

    def _record_name(self, key: str) -> str:
        return names.part_record_name(self.name, key)

    @functools.cached_property
    def _epoch(self) -> str | None:
        """Which read of the window this is: the hash of its object when the read began (None: never read)."""
        written = self._sidecar()
        return str(written.get("sha256")) if written is not None else None

    def load(self, key: str) -> PartRecord | None:
        """The record of part ``key``, when that part was written (by an earlier run of the same call)."""
        data = self.sink.read_bytes(self._record_name(key))
        return PartRecord.from_json(json.loads(data)) if data is not None else None

    def _require(self, key: str) -> PartRecord:
        record = self.load(key)
        if record is None:
            # Only a run the lane no longer waits for can list a part whose record is gone (its chunk committed).
            raise SinkError(f"part {key} of {self.name} has no record: it was committed or discarded")
        return record

    def ids_before(self, keys: Sequence[str]) -> IdSet:
        """Every record id in the parts ``keys`` (not to be changed: it may be the cached set)."""
        cached = ID_CACHE.get(self.name, keys, self._epoch)
        if cached is not None:
            return cached
        ids = IdSet()
        for key in keys:
            ids.update(IdSet.from_bytes(self._require(key).id_bytes))
        ID_CACHE.put(self.name, keys, ids, self._epoch)
        return ids

    def write(
        self, key: str, pages: Iterable[RecordPage], before: Sequence[str], outcome: Callable[[int], JsonDict]
    ) -> PartRecord:
        """Write part ``key`` from ``pages`` against the parts ``before`` it; ``outcome(repeats)`` is read once they
        end, given how many of the part's records an earlier part already held (it may raise: nothing is staged).

        Nothing is staged unless every page arrived: a source that fails part-way leaves no part.
        """
        prior = self.ids_before(before)
        seen = _AfterParts(prior)
        rules = ChunkRecords(self.chunk.window(), seen)
        data = b"".join(rules.lines(pages))  # the call's next HTTP page is fetched while this one is processed
        kept = rules.quarantine.settle(())  # settled against the good records at the commit, over every part
        record = PartRecord(
            key=key,
            records=rules.records,
            trimmed=rules.trimmed + rules.quarantine.trimmed,
            duplicates=rules.duplicates,
            id_bytes=seen.to_bytes(),
            malformed=kept,
            outcome=outcome(seen.repeats),
            sha256=hashlib.sha256(data).hexdigest(),
        )
        self.sink.stage_part(self.name, key, data)
        write_bytes(self.sink, self._record_name(key), _dumps(record.to_json()))  # last: the part is complete
        known = prior.copy()
        known.update(seen)
        ID_CACHE.put(self.name, [*before, key], known, self._epoch)
        return record

    def _sidecar(self) -> JsonDict | None:
        existing = self.sink.read_bytes(names.summary_object_name(self.name))
        return dict(json.loads(existing)) if existing is not None else None

    def committed(self, keys: Sequence[str]) -> ChunkSummary | None:
        """The summary of this read's commit of exactly the parts ``keys`` (or of parts with the same bytes under the
        same keys: nothing new), when it happened.

        This read's commit is the one its commit record names (``parts/<window>/commit.json``, kept until finalize
        clears ``parts/`` at the end of the pass): a later pass reading the window again writes its first part under
        the key the earlier read used, and must not take the earlier read's summary for its own.
        """
        written = self._sidecar()
        if written is None or written.get("parts") != list(keys):
            return None
        summary = ChunkSummary.from_json(written)
        if "partSha256" not in written:  # committed by a version that recorded no commit: its sidecar says it
            return summary
        commit = self.sink.read_bytes(self._record_name("commit"))
        if commit is None:
            return None  # an earlier pass's commit: this is a read of its own
        staged = [self.load(key) for key in keys]
        if any(record is None for record in staged):  # discarded by that very commit: this is its re-run
            return summary
        same = json.loads(commit).get("partSha256") == [record.sha256 for record in staged if record is not None]
        return summary if same else None

    def commit(
        self,
        keys: Sequence[str],
        *,
        attempt: int,
        incomplete: bool,
        evidence: Sequence[JsonDict] = (),
        exchange: JsonDict | None = None,
    ) -> ChunkSummary:
        """Make the chunk object from the parts ``keys`` (+ quarantine, + summary sidecar); returns the summary.

        ``evidence`` (what closed each record type's session) and ``exchange`` (the chunk's call tallies) go into the
        summary as they are."""
        sidecar = names.summary_object_name(self.name)
        done = self.committed(keys)
        if done is not None:  # this very commit ran before (its activity ran twice), or the window has not changed
            self.discard(keys)
            return done
        earlier = self._sidecar()  # an earlier read of this window (a settle pass): count what it did not return
        previous = ChunkSummary.from_json(earlier) if earlier is not None else None
        records = [self._require(key) for key in keys]
        quarantine = Quarantine(self.chunk.window())
        for record in records:
            for broken in record.malformed:
                quarantine.add(broken)
        malformed = quarantine.settle(self.ids_before(keys))
        stored = self.sink.commit_parts(self.name, keys)
        quarantine_name = None
        if malformed:
            quarantine_name = names.quarantine_object_name(self.name)
            write_bytes(self.sink, quarantine_name, b"".join(_quarantine_line(m) + b"\n" for m in malformed))
        summary = ChunkSummary(
            chunk=self.chunk,
            records=sum(r.records for r in records),
            trimmed=sum(r.trimmed for r in records) + quarantine.trimmed,
            duplicates=sum(r.duplicates for r in records) + quarantine.duplicates,
            malformed=len(malformed),
            untimed=sum(1 for m in malformed if m.created is None),
            blob=stored.name,
            sha256=stored.sha256,
            bytes=stored.bytes,
            incomplete=incomplete,
            quarantine_blob=quarantine_name,
            attempts=attempt,
            evidence=tuple(dict(e) for e in evidence),
            exchange=dict(exchange) if exchange is not None else None,
        )
        summary = with_late(summary, previous)
        hashes = [record.sha256 for record in records]
        write_bytes(self.sink, sidecar, _dumps({**summary.to_json(), "parts": list(keys), "partSha256": hashes}))
        write_bytes(self.sink, self._record_name("commit"), _dumps({"parts": list(keys), "partSha256": hashes}))
        self.discard(keys)
        return summary

    def discard(self, keys: Sequence[str]) -> None:
        """Forget the parts ``keys``: their staged data and their records (after the commit, or for a split)."""
        self.sink.discard_parts(self.name, keys)
        for key in keys:
            self.sink.delete(self._record_name(key))
        ID_CACHE.put(self.name, (), IdSet())
