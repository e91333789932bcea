"""A feed chunk's lane: one activity per listing piece of one content type, the cursor carried from call to call until
the last call commits the chunk; what the collection's reads did, added up for its status and manifest.

Phase: ``READ``. Pure, like the window it runs in (``shared.window.lanes.SourceLanes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from shared.models import ActivityResult, Chunk, JsonDict
from shared.requests.collection_spec import CollectionSpec
from shared.sources.feed.calls import ACTIVITY, CONTENT_TYPES, FeedRead, FeedReadResult, Tally
from shared.window.calls import ChunkCall
from shared.window.lanes import LaneHost
from shared.window.state import CallActivity, Carried, Lane, Step

READ = "read"
SECTION = "feed"
"""Its section of the carried state, of the status and output, and of the manifest."""
LAG_SECONDS, CONTENT_TYPES_KEY = "lagSeconds", "contentTypes"
"""Its keys in ``RunOptions.source_options``."""


class FeedLanes:
    """The lanes of one feed collection (``shared.window.lanes.SourceLanes``)."""

    first_phase = READ
    added_chunks = 0

    def __init__(self, spec: CollectionSpec, state: Carried) -> None:
        options = spec.options.source_options
        self.lag_seconds = float(options.get(LAG_SECONDS, 0))
        self.content_types = tuple(str(t) for t in options.get(CONTENT_TYPES_KEY) or CONTENT_TYPES)
        self.tally = Tally.from_json(state.sections.get(SECTION))
        """What the collection's reads did so far (from every call's result: deterministic)."""

    def resume_phase(self, lane: Lane) -> str:
        return READ

    def uses_slot(self, phase: str) -> bool:
        return phase == READ

    def submits(self, phase: str) -> bool:
        return False  # the feed has no daily submission quota (2,000 requests a minute)

    def has_progress(self, lane: Lane) -> bool:
        return lane.cursor is not None

    def may_start(self, lanes: Mapping[int, Lane]) -> bool:
        return True

    def sized(self, host: LaneHost, chunk: Chunk) -> Chunk:
        return chunk

    def learn(self, lane: Lane, result: ActivityResult) -> None:
        stats = result.data.get(SECTION)
        if isinstance(stats, dict):
            self.tally.add(Tally.from_json(stats))

    def call(self, lane: Lane, base: ChunkCall) -> CallActivity:
        read = FeedRead(base, lane.cursor, lane.calls - 1, self.lag_seconds, self.content_types)
        return CallActivity(lane.id, ACTIVITY, read.to_json())

    def ended(self, host: LaneHost, lane: Lane, result: ActivityResult) -> list[Step] | None:
        return None

    def succeeded(
        self, host: LaneHost, lane: Lane, result: ActivityResult, checked_at: datetime | None, due: datetime | None
    ) -> list[Step]:
        read = FeedReadResult.from_json(result.data)
        if read.summary is not None:  # the lane's last call committed its chunk
            return host.conclude(lane, ("done", read.summary))
        lane.cursor = read.cursor
        return host.next_call(lane)

    def concluding(self, host: LaneHost, lane: Lane) -> list[Step] | None:
        return None

    def status(self) -> JsonDict:
        return {
            SECTION: {
                **self.tally.to_json(),
                "lagHours": round(self.lag_seconds / 3600, 3),
                "contentTypes": list(self.content_types),
            }
        }

    def save(self, state: Carried) -> None:
        state.sections[SECTION] = self.tally.to_json()
