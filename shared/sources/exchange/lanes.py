"""An Exchange chunk's lane: one activity per ``Search-UnifiedAuditLog`` call, its session cursor carried from call to
call; windows sized before they start from what the collection learned, and what the calls cost.

Phase: ``COLLECT``. The learning and the pre-split rule are ``shared.sources.exchange.sizing``; this wires them into
the window (``shared.window.lanes.SourceLanes``). Pure, like the window.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from shared import names
from shared.models import ActivityResult, Chunk, JsonDict
from shared.requests.collection_spec import CollectionSpec
from shared.sources.exchange.calls import ExchangeCall, ExchangeCalled
from shared.sources.exchange.sizing import ExchangeSizing
from shared.window.calls import ChunkCall
from shared.window.lanes import LaneHost
from shared.window.state import CallActivity, Carried, Lane, Step

COLLECT = "collect"
SIZING = "exchange"
"""Its section of the carried state, of the status and output (what the calls cost), and of the manifest."""


class ExchangeLanes:
    """The lanes of one Exchange collection (``shared.window.lanes.SourceLanes``)."""

    first_phase = COLLECT

    def __init__(self, spec: CollectionSpec, state: Carried) -> None:
        self.options = spec.options
        self.state = state
        self.sizing = ExchangeSizing.from_json(state.sections.get(SIZING))
        """The tenant's density and sessions as learned, and what the calls cost (``sizing``)."""

    @property
    def added_chunks(self) -> int:
        """One per pre-split (one window became two)."""
        return self.sizing.presplits

    @property
    def _sizing(self) -> bool:
        return self.options.exchange_target_records > 0

    def resume_phase(self, lane: Lane) -> str:
        return COLLECT

    def uses_slot(self, phase: str) -> bool:
        return phase == COLLECT

    def submits(self, phase: str) -> bool:
        return False  # a search session submits no query: no daily quota

    def has_progress(self, lane: Lane) -> bool:
        return lane.cursor is not None

    def may_start(self, lanes: Mapping[int, Lane]) -> bool:
        """The probe: until a result taught the collection something, one lane runs alone."""
        return not self._sizing or self.sizing.learned or not lanes

    def sized(self, host: LaneHost, chunk: Chunk) -> Chunk:
        """The chunk, or its first piece when it is expected to hold too much (the rest wait first in line)."""
        if not self._sizing:
            return chunk
        sizing = self.sizing
        target = (
            self.options.exchange_target_records_continuing
            if sizing.continues
            else self.options.exchange_target_records
        )
        pieces = sizing.pieces(chunk, target, self.options.min_split_seconds)
        if len(pieces) > 1:
            host.state.requeued[:0] = pieces[1:]
            sizing.presplits += len(pieces) - 1
        return pieces[0]

    def learn(self, lane: Lane, result: ActivityResult) -> None:
        stats = result.data.get(SIZING)
        if isinstance(stats, dict):
            self.sizing.learn(lane.chunk, stats)

    def call(self, lane: Lane, base: ChunkCall) -> CallActivity:
        call = ExchangeCall(
            base,
            cursor=lane.cursor,
            number=lane.calls - 1,  # every call writes its own part, retries included
            split_on_full=self._split_on_full(),
            expected_records=self._expected_records(lane),  # when an empty first answer is surprising
        )
        return CallActivity(lane.id, names.ACTIVITY_EXCHANGE_COLLECT, call.to_json())

    def ended(self, host: LaneHost, lane: Lane, result: ActivityResult) -> list[Step] | None:
        return None

    def succeeded(
        self, host: LaneHost, lane: Lane, result: ActivityResult, checked_at: datetime | None, due: datetime | None
    ) -> list[Step]:
        called = ExchangeCalled.from_json(result.data)
        if called.summary is not None:  # the lane's last call committed its chunk
            return host.conclude(lane, ("done", called.summary))
        lane.cursor = called.cursor  # where its next call goes on
        return host.next_call(lane)

    def concluding(self, host: LaneHost, lane: Lane) -> list[Step] | None:
        return None

    def status(self) -> JsonDict:
        return {SIZING: self.sizing.report(self.state.splits)}

    def save(self, state: Carried) -> None:
        state.sections[SIZING] = self.sizing.to_json()

    def _split_on_full(self) -> bool:
        """The service was seen not to continue its sessions: a full call splits its window at once."""
        return self._sizing and self.sizing.continues is False

    def _expected_records(self, lane: Lane) -> float | None:
        """What the chunk's densest record type is expected to hold, from the density learned (None: not learned, or
        sizing off): tells the lane's calls when an empty first answer is surprising."""
        if not self._sizing:
            return None
        return self.sizing.expected(lane.chunk, others_only=True)
