"""Exchange windows sized from what the tenant holds (issue 17): the first lane probes alone, later chunks are split
before they start when they are expected to hold more than a call can prove, and what the calls cost is counted.

The responder below plays a tenant of a given density behind a service whose sessions continue or start over, one
activity per InvokeCommand call, the way ``activities.exchange_calls`` reports (its ``exchange`` stats)."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from datetime import timedelta

from shared.models import ActivityResult, Chunk, ChunkSummary
from shared.sources.exchange.sizing import ExchangeSizing
from shared.sources.registry import window_for
from shared.window.machine import CollectionWindow
from shared.window.state import CallActivity
from tests.collector.window_sim import T0, run, spec

SIZE = 5000


@dataclass
class Tenant:
    """``per_hour`` records an hour, evenly; sessions that ``continues`` or start over at their second call."""

    per_hour: float
    continues: bool
    calls: int = 0
    committed: list[Chunk] = field(default_factory=list)
    split_on_full_seen: list[bool] = field(default_factory=list)

    def records(self, chunk: Chunk) -> int:
        return round(self.per_hour * chunk.seconds / 3600)

    def respond(self, step: CallActivity, _: CollectionWindow) -> ActivityResult:
        chunk = Chunk.from_json(step.input["chunk"])
        cursor = step.input.get("cursor") or {}
        call = int(cursor.get("call", 0)) + 1
        self.calls += 1
        self.split_on_full_seen.append(bool(step.input.get("splitOnFull")))
        n = self.records(chunk)
        splittable = not step.input["allowIncomplete"]
        if call > 1 and not self.continues:  # the session started over: no evidence
            if splittable:
                return ActivityResult.split({"exchange": self._stats(SIZE, False, continues=False)})
            return self._done(step, chunk, SIZE, incomplete=True, continues=False)
        rows = min(SIZE, n - SIZE * (call - 1))
        read = SIZE * (call - 1) + rows
        if rows < SIZE:
            return self._done(step, chunk, read, continues=True if call > 1 else None)
        if step.input.get("splitOnFull") and splittable:
            return ActivityResult.split({"exchange": self._stats(read, False, continues=None)})
        stats = self._stats(read, False, continues=True if call > 1 else None)
        return ActivityResult.success({"cursor": {"call": call}, "exchange": stats})

    def _stats(self, rows: int, exact: bool, *, continues: bool | None) -> dict[str, object]:
        return {"calls": 1, "fullCalls": 0, "rows": rows, "exact": exact, "continues": continues}

    def _done(
        self, step: CallActivity, chunk: Chunk, rows: int, *, incomplete: bool = False, continues: bool | None
    ) -> ActivityResult:
        self.committed.append(chunk)
        summary = ChunkSummary(chunk, rows, 0, 0, 0, "b", "h", 1, incomplete).to_json()
        return ActivityResult.success(
            {"summary": summary, "exchange": self._stats(rows, not incomplete, continues=continues)}
        )


def sized(hours: int, k: int = 3, target: int = 3250, continuing: int = 32_500, **options: object) -> CollectionWindow:
    return window_for(
        spec(
            hours,
            k,
            "exchange",
            exchange_target_records=target,
            exchange_target_records_continuing=continuing,
            **options,
        )
    )


def _covers_once(chunks: list[Chunk], hours: int) -> bool:
    ordered = sorted(chunks, key=lambda c: c.start)
    return (
        ordered[0].start == T0
        and ordered[-1].end == T0 + timedelta(hours=hours)
        and all(a.end == b.start for a, b in itertools.pairwise(ordered))
    )


def test_the_first_lane_probes_alone_then_the_rest_start_sized() -> None:
    window = sized(6)
    first = window.fill()
    assert len(first) == 1 and len(window.lanes) == 1  # K = 3, but nothing is known about the tenant yet
    tenant = Tenant(12_000, continues=False)
    (step,) = first
    assert isinstance(step, CallActivity)
    more = window.on_result(step.lane, tenant.respond(step, window)) + window.fill()
    assert len(window.lanes) == 3  # the first call showed at least 5,000 an hour: the others start, each halved
    halves = [Chunk.from_json(s.input["chunk"]) for s in more if isinstance(s, CallActivity) and s.lane != step.lane]
    assert [c.seconds for c in halves] == [1800.0, 1800.0]
    assert window.source.sizing.presplits == 1 and window.total == 7


def test_a_dense_tenant_behind_sessions_that_start_over_is_read_in_short_calls_after_a_few_splits() -> None:
    tenant = Tenant(12_000, continues=False)
    window = sized(24)
    run(window, tenant.respond, random.Random(3))
    assert window.finished and window.output(None)["status"] == "Completed"
    assert _covers_once(tenant.committed, 24) and sum(tenant.records(c) for c in tenant.committed) == 24 * 12_000
    exchange = window.status()["exchange"]
    assert exchange["calls"] == tenant.calls and exchange["presplits"] > 0
    # Once the service was seen not to continue, a full call splits at once, and later chunks are pre-split to
    # pieces one call proves: the calls stay near one per piece (24 hours x 4 pieces = 96) plus the learning.
    assert any(tenant.split_on_full_seen)
    assert tenant.calls < 96 * 1.25, tenant.calls
    assert max(c.seconds for c in tenant.committed[-20:]) <= 900  # 12,000 an hour: quarters of 3,000


def test_sessions_that_continue_let_windows_grow_to_a_share_of_the_session_cap() -> None:
    tenant = Tenant(12_000, continues=True)
    window = sized(24)
    run(window, tenant.respond, random.Random(5))
    assert _covers_once(tenant.committed, 24) and window.source.sizing.continues is True
    assert window.state.splits == 0
    # 12,000 an hour in calls of 5,000: 3 calls per hour is the least any reader needs; a few halves early on
    assert tenant.calls <= 24 * 3 + 6, tenant.calls
    assert not any(tenant.split_on_full_seen)


def test_sizing_off_is_the_planned_chunks_as_they_are_and_counts_calls_only() -> None:
    tenant = Tenant(1_000, continues=True)
    assert len(window_for(spec(6, 3, "exchange")).fill()) == 3  # an input written before sizing: no probe
    window = window_for(spec(6, 3, "exchange"))
    run(window, tenant.respond, random.Random(1))
    assert window.source.sizing.presplits == 0 and len(tenant.committed) == 6
    assert window.status()["exchange"] == {"calls": 6, "fullCalls": 0, "splits": 0, "presplits": 0}


def test_the_same_results_give_the_same_steps() -> None:
    steps = []
    for _ in range(2):
        tenant = Tenant(9_000, continues=False)
        steps.append(run(sized(8), tenant.respond, random.Random(11)))
    assert steps[0] == steps[1]


def test_the_expectation_comes_from_the_nearest_window_and_a_split_lower_bound() -> None:
    sizing = ExchangeSizing()
    assert sizing.expected(Chunk(T0, T0 + timedelta(hours=1))) is None
    sizing.learn(Chunk(T0, T0 + timedelta(hours=1)), {"rows": 1_000, "exact": True})
    sizing.learn(Chunk(T0 + timedelta(hours=5), T0 + timedelta(hours=6)), {"rows": 20_000, "exact": False})
    near_first = Chunk(T0 + timedelta(hours=1), T0 + timedelta(hours=2))
    near_last = Chunk(T0 + timedelta(hours=6), T0 + timedelta(hours=7))
    assert sizing.expected(near_first) == 1_000 and sizing.expected(near_last) == 20_000
    assert len(sizing.pieces(near_last, 3_250, 60)) == 8  # 20,000 / 8 = 2,500
    assert len(sizing.pieces(near_last, 3_250, 900)) == 4  # no piece under the minimum split
    sizing.learn(Chunk(T0 + timedelta(hours=5), T0 + timedelta(hours=6)), {"rows": 2_000, "exact": True})
    assert sizing.expected(near_last) == 2_000 and len(sizing.samples) == 2  # one sample per window, the newest
    assert ExchangeSizing.from_json(sizing.to_json()) == sizing


def test_the_targets_come_from_the_fraction_setting_and_zero_turns_sizing_off() -> None:
    import pytest

    from shared.errors import ConfigError
    from shared.settings import Settings
    from shared.sources.registry import source

    options = source("exchange").run_options(Settings.from_env({}), 3, high_completeness=False)
    assert (options.exchange_target_records, options.exchange_target_records_continuing) == (3250, 32_500)
    capped = Settings.from_env({"COLLECTOR_EXCHANGE_TARGET_FRACTION": "0.5", "AUDIT_EXCHANGE_SESSION_CAP": "2000"})
    options = source("exchange").run_options(capped, 3, high_completeness=False)
    assert (options.exchange_target_records, options.exchange_target_records_continuing) == (1000, 1000)
    off = source("exchange").run_options(
        Settings.from_env({"COLLECTOR_EXCHANGE_TARGET_FRACTION": "0"}), 3, high_completeness=False
    )
    assert off.exchange_target_records == 0
    with pytest.raises(ConfigError, match="COLLECTOR_EXCHANGE_TARGET_FRACTION"):
        Settings.from_env({"COLLECTOR_EXCHANGE_TARGET_FRACTION": "1.5"})
