"""Instances and History tables, run against the memory and the SQLite store alike."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from durable_local.clock import ManualClock
from durable_local.model import RuntimeStatus
from durable_local.ports import EtagConflictError, HistoryBatch, InstanceQuery
from durable_local.storage import StoreBundle
from tests.engine.storage.conftest import T0, event, record


def batch(
    first: int, count: int, *, final: bool = True, execution_id: str = "exec1", iid: str = "inst1"
) -> HistoryBatch:
    events = [event(first + i) for i in range(count)]
    return HistoryBatch(iid, execution_id, first, events, is_final_batch=final)


def event_ids(history_events: list) -> list[int]:  # type: ignore[type-arg]
    return [e["EventId"] for e in history_events]


def test_empty_history(store: StoreBundle) -> None:
    history = store.tracking.get_history("nobody")
    assert (history.events, history.etag, history.execution_id) == ([], None, None)


def test_batches_append_in_sequence_order_with_fresh_etags(store: StoreBundle, clock: ManualClock) -> None:
    tracking = store.tracking
    etag1 = tracking.write_history_batch(batch(0, 3), None)
    clock.advance(10)
    etag2 = tracking.write_history_batch(batch(3, 2), etag1)
    assert etag1 != etag2
    history = tracking.get_history("inst1")
    assert event_ids(history.events) == [0, 1, 2, 3, 4]
    assert history.events[0] == event(0)
    assert (history.etag, history.execution_id) == (etag2, "exec1")
    assert history.checkpoint_complete is True
    assert history.last_checkpoint_time == T0 + timedelta(seconds=10)


def test_two_writers_second_gets_etag_conflict(store: StoreBundle) -> None:
    tracking = store.tracking
    etag = tracking.write_history_batch(batch(0, 2), None)
    seen_by_a = tracking.get_history("inst1").etag
    seen_by_b = tracking.get_history("inst1").etag
    assert seen_by_a == seen_by_b == etag
    tracking.write_history_batch(batch(2, 1), seen_by_a)
    with pytest.raises(EtagConflictError):
        tracking.write_history_batch(batch(2, 3), seen_by_b)
    # The loser's rows did not land.
    assert event_ids(tracking.get_history("inst1").events) == [0, 1, 2]


def test_insert_conflicts_when_history_exists_and_merge_fails_without_it(store: StoreBundle) -> None:
    tracking = store.tracking
    tracking.write_history_batch(batch(0, 1), None)
    with pytest.raises(EtagConflictError):
        tracking.write_history_batch(batch(0, 1), None)
    with pytest.raises(EtagConflictError):
        tracking.write_history_batch(batch(0, 1, iid="other"), 'W/"made-up"')
    assert tracking.get_history("other").etag is None


def test_continue_as_new_replaces_rows_of_old_execution(store: StoreBundle) -> None:
    tracking = store.tracking
    etag = tracking.write_history_batch(batch(0, 6, execution_id="old"), None)
    etag = tracking.write_history_batch(batch(0, 2, execution_id="new"), etag)
    history = tracking.get_history("inst1")
    assert history.execution_id == "new"
    assert event_ids(history.events) == [0, 1]  # rows 2..5 of "old" must not leak in
    assert tracking.get_history("inst1", "new").events == history.events
    old = tracking.get_history("inst1", "old")
    assert (old.events, old.execution_id, old.etag) == ([], "old", etag)
    etag = tracking.write_history_batch(batch(2, 1, execution_id="new"), etag)
    assert event_ids(tracking.get_history("inst1").events) == [0, 1, 2]


def test_checkpoint_incomplete_after_non_final_batch(store: StoreBundle, clock: ManualClock) -> None:
    """Crash point C3: the checkpoint stopped between entity-group batches."""
    tracking = store.tracking
    etag = tracking.write_history_batch(batch(0, 99, final=False), None)
    partial = tracking.get_history("inst1")
    assert partial.checkpoint_complete is False
    assert partial.last_checkpoint_time is None
    assert len(partial.events) == 99
    clock.advance(5)
    etag = tracking.write_history_batch(batch(99, 1, final=True), etag)
    complete = tracking.get_history("inst1")
    assert complete.checkpoint_complete is True
    assert complete.last_checkpoint_time == T0 + timedelta(seconds=5)
    clock.advance(5)
    tracking.write_history_batch(batch(100, 1, final=False), etag)
    again = tracking.get_history("inst1")
    assert again.checkpoint_complete is False
    assert again.last_checkpoint_time == T0 + timedelta(seconds=5)  # non-final batches keep the last stamp


def test_history_rows_rewritten_at_same_sequence_replace_the_old_row(store: StoreBundle) -> None:
    tracking = store.tracking
    etag = tracking.write_history_batch(batch(0, 3, final=False), None)
    replacement = HistoryBatch("inst1", "exec1", 2, [event(42), event(43)], is_final_batch=True)
    tracking.write_history_batch(replacement, etag)
    assert event_ids(tracking.get_history("inst1").events) == [0, 1, 42, 43]


def test_returned_history_is_a_private_copy(store: StoreBundle) -> None:
    store.tracking.write_history_batch(batch(0, 1), None)
    store.tracking.get_history("inst1").events[0]["IsPlayed"] = True
    assert store.tracking.get_history("inst1").events[0]["IsPlayed"] is False


def test_set_new_execution_insert_and_overwrite(store: StoreBundle) -> None:
    tracking = store.tracking
    assert tracking.set_new_execution(record("a", input='{"x":1}'), overwrite=False) is True
    assert tracking.set_new_execution(record("a", execution_id="exec2"), overwrite=False) is False
    assert tracking.get_instance("a").execution_id == "exec1"  # type: ignore[union-attr]
    assert tracking.set_new_execution(record("a", execution_id="exec2"), overwrite=True) is True
    stored = tracking.get_instance("a")
    assert stored is not None
    assert (stored.execution_id, stored.input) == ("exec2", None)


def test_instance_round_trip_keeps_every_field(store: StoreBundle) -> None:
    full = record(
        "full",
        status=RuntimeStatus.COMPLETED,
        version="1.0",
        input='{"a": [1, 2]}',
        output='"done"',
        custom_status='{"p": 3}',
        completed_time=T0 + timedelta(hours=1, microseconds=7),
        generation=2,
        parent_instance_id="parent",
        scheduled_start_time=T0 + timedelta(minutes=1),
        tags={"k": "v"},
    )
    store.tracking.update_instance(full)
    assert store.tracking.get_instance("full") == full
    assert store.tracking.get_instance("Full") is None  # keys are case-sensitive


def test_update_instance_keeps_created_time_unless_new_execution(store: StoreBundle) -> None:
    tracking = store.tracking
    tracking.set_new_execution(record("a"), overwrite=False)
    later = T0 + timedelta(hours=1)
    tracking.update_instance(record("a", status=RuntimeStatus.RUNNING, created=later))
    stored = tracking.get_instance("a")
    assert stored is not None
    assert (stored.status, stored.created_time) == (RuntimeStatus.RUNNING, T0)
    tracking.update_instance(record("a", status=RuntimeStatus.RUNNING, created=later, execution_id="exec2"))
    assert tracking.get_instance("a").created_time == later  # type: ignore[union-attr]
    tracking.update_instance(record("b", created=later))  # insert when missing
    assert tracking.get_instance("b").created_time == later  # type: ignore[union-attr]


def test_get_instances_skips_missing_and_keeps_order(store: StoreBundle) -> None:
    for name in ("a", "b", "c"):
        store.tracking.update_instance(record(name))
    found = store.tracking.get_instances(["c", "missing", "a"])
    assert [r.instance_id for r in found] == ["c", "a"]


def _seed_instances(store: StoreBundle) -> None:
    statuses = [RuntimeStatus.RUNNING, RuntimeStatus.COMPLETED, RuntimeStatus.FAILED]
    for i in range(25):
        prefix = "job" if i % 2 == 0 else "other"
        created = T0 + timedelta(hours=i)
        store.tracking.update_instance(record(f"{prefix}-{i:03d}", status=statuses[i % 3], created=created))


def _all_pages(store: StoreBundle, query: InstanceQuery) -> tuple[list[str], int]:
    ids: list[str] = []
    pages = 0
    while True:
        page = store.tracking.query_instances(query)
        pages += 1
        assert len(page.instances) <= query.page_size
        ids.extend(r.instance_id for r in page.instances)
        if page.continuation_token is None:
            return ids, pages
        query.continuation_token = page.continuation_token


def test_query_pages_through_everything_in_id_order(store: StoreBundle) -> None:
    _seed_instances(store)
    ids, pages = _all_pages(store, InstanceQuery(page_size=7))
    assert ids == sorted(f"{'job' if i % 2 == 0 else 'other'}-{i:03d}" for i in range(25))
    assert pages == 4
    exact, exact_pages = _all_pages(store, InstanceQuery(page_size=25))
    assert (len(exact), exact_pages) == (25, 1)


def test_query_filters_combine(store: StoreBundle) -> None:
    _seed_instances(store)
    query = InstanceQuery(
        runtime_status=[RuntimeStatus.RUNNING, RuntimeStatus.FAILED],
        created_from=T0 + timedelta(hours=4),
        created_to=T0 + timedelta(hours=20),
        instance_id_prefix="job",
        page_size=2,
    )
    ids, _ = _all_pages(store, query)
    expected = [
        f"job-{i:03d}" for i in range(4, 21) if i % 2 == 0 and i % 3 in (0, 2)
    ]  # RUNNING is i%3==0, FAILED is i%3==2
    assert ids == expected
    assert ids  # the filter must select something for this test to mean anything


def test_query_prefix_is_case_sensitive_and_literal(store: StoreBundle) -> None:
    for name in ("Job-1", "job-2", "job%3", "job_4", "jobx"):
        store.tracking.update_instance(record(name))
    page = store.tracking.query_instances(InstanceQuery(instance_id_prefix="job"))
    assert [r.instance_id for r in page.instances] == ["job%3", "job-2", "job_4", "jobx"]
    only = store.tracking.query_instances(InstanceQuery(instance_id_prefix="job%")).instances
    assert [r.instance_id for r in only] == ["job%3"]


def test_query_created_bounds_compare_instants_not_offsets(store: StoreBundle) -> None:
    store.tracking.update_instance(record("a", created=T0))
    # 01:00+01:00 is the same instant as T0 (00:00Z): an inclusive lower bound must find the row.
    same_instant = datetime(2024, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))
    found = store.tracking.query_instances(InstanceQuery(created_from=same_instant))
    assert [r.instance_id for r in found.instances] == ["a"]
    none = store.tracking.query_instances(InstanceQuery(created_from=T0 + timedelta(microseconds=1)))
    assert none.instances == []


def test_query_rejects_bad_token_and_page_size(store: StoreBundle) -> None:
    with pytest.raises(ValueError, match="continuation"):
        store.tracking.query_instances(InstanceQuery(continuation_token="garbage"))
    with pytest.raises(ValueError, match="page_size"):
        store.tracking.query_instances(InstanceQuery(page_size=0))


def test_purge_removes_row_and_history(store: StoreBundle) -> None:
    tracking = store.tracking
    tracking.update_instance(record("inst1"))
    tracking.write_history_batch(batch(0, 3), None)
    tracking.update_instance(record("keep"))
    tracking.write_history_batch(batch(0, 1, iid="keep"), None)
    assert tracking.purge_instance("inst1") is True
    assert tracking.get_instance("inst1") is None
    assert tracking.get_history("inst1").etag is None
    assert tracking.purge_instance("inst1") is False
    assert len(tracking.get_history("keep").events) == 1
    # After a purge the id can start again with an insert.
    tracking.write_history_batch(batch(0, 1), None)
    assert len(tracking.get_history("inst1").events) == 1
