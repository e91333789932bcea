"""The window's Exchange lanes: sized before they start, learning from each call, and what their calls cost.

A mixin of ``shared.window.machine.CollectionWindow`` (kept apart so both stay small), pure like it. The learning and
the pre-split rule are ``shared.window.sizing``; this only wires them into the window's transitions.
"""

from __future__ import annotations

from shared.models import ActivityResult, Chunk, JsonDict
from shared.requests.collection_spec import CollectionSpec
from shared.window.state import Carried, Lane, RunOptions


class ExchangeLanes:
    """Exchange steps of the window; ``CollectionWindow`` provides the state used here."""

    spec: CollectionSpec
    state: Carried
    lanes: dict[int, Lane]

    @property
    def options(self) -> RunOptions:
        return self.spec.options

    @property
    def _sizing(self) -> bool:
        return self.spec.source == "exchange" and self.options.exchange_target_records > 0

    def _may_start_sized(self) -> bool:
        """The probe: until a result taught the collection something, one Exchange lane runs alone."""
        return not self._sizing or self.state.exchange.learned or not self.lanes

    def _sized(self, chunk: Chunk) -> Chunk:
        """The chunk, or its first piece when it is expected to hold too much (the rest wait first in line)."""
        if not self._sizing:
            return chunk
        sizing = self.state.exchange
        target = (
            self.options.exchange_target_records_continuing
            if sizing.continues
            else self.options.exchange_target_records
        )
        pieces = sizing.pieces(chunk, target, self.options.min_split_seconds)
        if len(pieces) > 1:
            self.state.requeued[:0] = pieces[1:]
            sizing.presplits += len(pieces) - 1
        return pieces[0]

    def _learn_exchange(self, lane: Lane, result: ActivityResult) -> None:
        stats = result.data.get("exchange")
        if self.spec.source == "exchange" and isinstance(stats, dict):
            self.state.exchange.learn(lane.chunk, stats)

    def _split_on_full(self) -> bool:
        """The service was seen not to continue its sessions: a full call splits its window at once."""
        return self._sizing and self.state.exchange.continues is False

    def _expected_records(self, lane: Lane) -> float | None:
        """What the chunk's densest record type is expected to hold, from the density learned (None: not learned, or
        sizing off): tells the lane's calls when an empty first answer is surprising."""
        if not self._sizing:
            return None
        return self.state.exchange.expected(lane.chunk, others_only=True)

    def _note_incomplete(self, lane: Lane, summary: JsonDict) -> None:
        reasons = [str(e.get("detail")) for e in summary.get("evidence") or () if not e.get("complete", True)]
        self.state.incomplete_notes.append({"window": lane.chunk.span_json(), "reasons": reasons})

    def _exchange_status(self) -> JsonDict | None:
        return self.state.exchange.report(self.state.splits) if self.spec.source == "exchange" else None
