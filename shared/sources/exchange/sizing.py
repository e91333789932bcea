"""Exchange windows sized from what the tenant holds, so most calls come back short and splits are rare (issue 17).

A window is proven complete only by a call that returns fewer rows than it asked (``shared.audit.exchange_evidence``),
and a session that does not continue makes every window over one call's ``ResultSize`` cost a split. So the window
learns, from its own activity results (deterministic: they are in history), the tenant's **density** (rows per
second of the densest record type) and whether the service's **sessions continue**, and *pre-splits* a chunk before
its lane starts when it expects more records than a target: ``RunOptions.exchange_target_records`` (a fraction of
``ResultSize``) while sessions are not known to continue, ``exchange_target_records_continuing`` (the same fraction
of the session cap) once they are. The user's interval is where planning starts, not a promise the service must keep.

* The first chunk is a cheap probe: until a result taught something, no other lane starts (its first call already
  shows a lower bound of the density, or the exact count when it comes back short).
* Each result of an Exchange call adds a sample for its window (a lower bound while the chunk is read, exact once it
  is committed complete); the expectation for a chunk is the density of the nearest sample in time. A full call whose
  ``ResultCount`` announces more than was read raises the lower bound to that claim: never evidence of completeness,
  but trusting a claim of "more" can only cost extra splits.
* Once the service is known not to continue its sessions, a full call splits its window at once (``splitOnFull``)
  instead of spending a second call that cannot help.
* What the collection's calls cost is counted: calls, full calls, splits (state), pre-splits, and the calls that
  confirmed an empty or bogus first answer (``confirmations``; ``falseAnswers``: those that rows proved false).
* The expectation for a chunk also says when an empty first answer is surprising (``expectedRecords`` in each call's
  payload; ``shared.audit.exchange_evidence.EmptyRule``): a surprising empty needs one more agreeing answer.

With a target of 0 (``RunOptions``; also what an input written before this existed reads as) none of this runs, so a
collection started by an older version replays exactly as it started; the counting alone never changes a decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from shared.models import Chunk, JsonDict, iso, parse_iso

SAMPLES = 32
"""Windows remembered for the density (the newest, one per window)."""
MAX_HALVINGS = 10
"""A pre-split makes at most 2^10 pieces of one chunk, whatever a sample says."""


@dataclass(slots=True)
class Sample:
    start: datetime
    end: datetime
    rows: int
    exact: bool
    """True: the window's densest record type holds exactly ``rows``; False: at least."""

    @property
    def density(self) -> float:
        return self.rows / max(1.0, (self.end - self.start).total_seconds())

    @property
    def middle(self) -> float:
        return (self.start.timestamp() + self.end.timestamp()) / 2

    def to_json(self) -> JsonDict:
        return {"start": iso(self.start), "end": iso(self.end), "rows": self.rows, "exact": self.exact}

    @classmethod
    def from_json(cls, data: JsonDict) -> Sample:
        return cls(parse_iso(data["start"]), parse_iso(data["end"]), int(data["rows"]), bool(data["exact"]))


@dataclass(slots=True)
class ExchangeSizing:
    """What the collection learned about the tenant's Exchange service, and what its calls cost (carried)."""

    samples: list[Sample] = field(default_factory=list)
    continues: bool | None = None
    """Whether the service's sessions continue (None: not seen yet); the latest observation wins."""
    calls: int = 0
    full_calls: int = 0
    presplits: int = 0
    """Extra windows made by pre-splitting (one per halving, as ``Carried.splits`` counts one per split)."""
    confirmations: int = 0
    """Calls that asked a window again after an empty or bogus first answer (``exchange_evidence.EmptyRule``)."""
    false_answers: int = 0
    """Empty or bogus first answers that rows read afterwards proved false."""

    @property
    def learned(self) -> bool:
        return bool(self.samples)

    def learn(self, chunk: Chunk, stats: JsonDict) -> None:
        """Take in an Exchange activity's ``exchange`` stats for its chunk (``ExchangeCursor.stats``)."""
        self.calls += int(stats.get("calls", 0))
        self.full_calls += int(stats.get("fullCalls", 0))
        self.confirmations += int(stats.get("confirmations", 0))
        self.false_answers += int(stats.get("falseAnswers", 0))
        continues = stats.get("continues")
        if continues is not None:
            self.continues = bool(continues)
        exact = bool(stats.get("exact", False))
        rows = int(stats.get("rows", 0))
        if not exact:  # a claim of "more" (ResultCount) may only make the expectation larger
            rows = max(rows, int(stats.get("hint") or 0))
        if not exact and rows == 0:  # "at least nothing" (an empty answer not yet confirmed) teaches nothing
            return
        kept = [s for s in self.samples if (s.start, s.end) != (chunk.start, chunk.end)]
        self.samples = [*kept, Sample(chunk.start, chunk.end, rows, exact)][-SAMPLES:]

    def expected(self, chunk: Chunk, *, others_only: bool = False) -> float | None:
        """Records the chunk's densest record type is expected to hold (None: nothing learned yet).

        ``others_only``: from other windows' samples only (what the chunk's own calls showed so far is no prior)."""
        samples = [s for s in self.samples if not (others_only and (s.start, s.end) == (chunk.start, chunk.end))]
        if not samples:
            return None
        middle = (chunk.start.timestamp() + chunk.end.timestamp()) / 2
        nearest = min(samples, key=lambda s: (abs(s.middle - middle), -s.density))
        return nearest.density * chunk.seconds

    def pieces(self, chunk: Chunk, target: int, min_split_seconds: float) -> list[Chunk]:
        """The chunk, or its halves (and theirs) until each is expected to hold at most ``target`` records."""
        expected = self.expected(chunk)
        if expected is None or target <= 0 or expected <= target:
            return [chunk]
        halvings = 0
        seconds = chunk.seconds
        while expected > target and halvings < MAX_HALVINGS and seconds / 2 >= min_split_seconds:
            expected, seconds, halvings = expected / 2, seconds / 2, halvings + 1
        pieces = [chunk]
        for _ in range(halvings):
            pieces = [half for piece in pieces for half in piece.halves()]
        return pieces

    def report(self, splits: int) -> JsonDict:
        report: JsonDict = {
            "calls": self.calls,
            "fullCalls": self.full_calls,
            "splits": splits,
            "presplits": self.presplits,
        }
        if self.confirmations or self.false_answers:  # what confirming empty first answers cost, and found
            report.update(confirmations=self.confirmations, falseAnswers=self.false_answers)
        return report

    def to_json(self) -> JsonDict:
        return {
            "samples": [s.to_json() for s in self.samples],
            "continues": self.continues,
            "calls": self.calls,
            "fullCalls": self.full_calls,
            "presplits": self.presplits,
            "confirmations": self.confirmations,
            "falseAnswers": self.false_answers,
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> ExchangeSizing:
        if not data:
            return cls()
        continues = data.get("continues")
        return cls(
            samples=[Sample.from_json(s) for s in data.get("samples") or ()],
            continues=bool(continues) if continues is not None else None,
            calls=int(data.get("calls", 0)),
            full_calls=int(data.get("fullCalls", 0)),
            presplits=int(data.get("presplits", 0)),
            confirmations=int(data.get("confirmations", 0)),
            false_answers=int(data.get("falseAnswers", 0)),
        )
