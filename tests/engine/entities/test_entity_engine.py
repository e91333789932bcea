"""Entities on the running engine: order per sender, one batch at a time, persistence, client operations,
``call_entity`` inside ``task_any`` under the shim, and the separate entity ready queue."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from durable_local.clock import SystemClock
from durable_local.engine import Engine
from durable_local.entities.client import EntityQuery
from durable_local.entities.ids import EntityId
from durable_local.errors import FunctionNotFoundError
from durable_local.model import RuntimeStatus, SchedulingMode
from durable_local.storage import StoreBundle, open_memory_store, open_sqlite_store
from tests.engine.runtime.conftest import client_input, fast_settings, wait_until

from .apps import Recorder

TIMEOUT = 60


@pytest.fixture(params=["memory", "sqlite"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], StoreBundle]]:
    opened: list[StoreBundle] = []
    clock = SystemClock()

    def factory() -> StoreBundle:
        if request.param == "memory" and opened:
            return opened[0]  # the same in-memory store outlives the engines that use it
        bundle = open_memory_store(clock) if request.param == "memory" else open_sqlite_store(tmp_path / "h.db", clock)
        opened.append(bundle)
        return bundle

    yield factory
    for bundle in opened:
        bundle.close()


class Engines:
    def __init__(self, store_factory: Callable[[], StoreBundle]) -> None:
        self.store_factory = store_factory
        self.recorder = Recorder()
        self.running: list[Engine] = []

    def start(self, **overrides: object) -> Engine:
        settings = fast_settings(orchestration_worker_threads=4, **overrides)
        engine = Engine(self.recorder.registry(), store=self.store_factory(), settings=settings, clock=SystemClock())
        engine.start()
        self.running.append(engine)
        return engine

    def finish(self, engine: Engine, instance_id: str) -> object:
        status = engine.wait_for_completion(instance_id, TIMEOUT)
        assert status is not None and status.runtime_status is RuntimeStatus.COMPLETED, status
        return json.loads(status.output or "null")


@pytest.fixture
def engines(store_factory: Callable[[], StoreBundle]) -> Iterator[Engines]:
    made = Engines(store_factory)
    yield made
    for engine in made.running:
        engine.stop(drain_timeout=2)


def test_each_senders_operations_arrive_in_order_and_one_batch_runs_at_a_time(engines: Engines) -> None:
    engine = engines.start()
    tags, n = ["a", "b", "c", "d"], 12
    ids = [engine.start_new("appender", input_json=client_input({"key": "k", "tag": t, "n": n})) for t in tags]
    for index in range(8):
        engine.signal_entity(EntityId.of("ledger", "k"), "append", sdk_input(f"client:{index}"))
    outputs = {tag: engines.finish(engine, instance_id) for tag, instance_id in zip(tags, ids)}
    assert wait_until(lambda: _ledger(engine, "k") is not None and len(_ledger(engine, "k") or []) == 4 * n + 8)
    entries = _ledger(engine, "k") or []
    for tag in tags:
        mine = [e for e in entries if e.startswith(f"{tag}:")]
        assert mine == [f"{tag}:{i}" for i in range(n)]  # one sender's operations run in the order sent
        output = outputs[tag]
        assert isinstance(output, dict)
        # A call sent after signals sees them: the entity delivers one sender's requests in order.
        assert [e for e in output["final"] if e.startswith(f"{tag}:")] == mine
        assert [e for e in output["midway"] if e.startswith(f"{tag}:")] == mine[: n // 2 + 1]
    assert sorted(e for e in entries if e.startswith("client:")) == [f"client:{i}" for i in range(8)]
    assert engines.recorder.peak["@ledger@k"] == 1  # never two batches of one entity at once
    assert max(size for entity, size, _ in engines.recorder.batches if entity == "@ledger@k") > 1  # real batches


def test_entity_state_survives_an_engine_restart(engines: Engines) -> None:
    first = engines.start()
    answers = engines.finish(first, first.start_new("adder", input_json=client_input({"key": "p", "n": 5})))
    assert answers == [1, 2, 3, 4, 5]
    first.stop(drain_timeout=2)
    second = engines.start()
    state = second.read_entity_state(EntityId.of("tally", "p"))
    assert state is not None and json.loads(state.state or "null") == 5
    again = engines.finish(second, second.start_new("adder", input_json=client_input({"key": "p", "n": 3})))
    assert again == [6, 7, 8]
    # The entity's checkpoint sends its answers first, then writes its history, then its Instances row (DTFx's
    # order), so the caller can hold the answer 8 while the row still says 7 for a moment: wait for the row, which
    # must then say 8 (a lost increment would leave 7, one applied twice 9).
    assert wait_until(lambda: _row_state(second, "@tally@p") not in (None, "7"), timeout=TIMEOUT)
    row = second.get_status("@tally@p")
    assert row is not None and row.name == "@tally@p" and row.runtime_status is RuntimeStatus.RUNNING
    assert json.loads(row.input or "{}")["state"] == "8" and json.loads(row.custom_status or "") == {
        "entityExists": True
    }


def test_client_signal_read_and_list(engines: Engines) -> None:
    engine = engines.start()
    tally = EntityId.of("Tally", "x")  # entity names are case-insensitive and stored lower case
    assert engine.read_entity_state(tally) is None
    engine.signal_entity(tally, "add", sdk_input(5))
    engine.signal_entity(EntityId.of("tally", "y"), "add", sdk_input(1))
    assert wait_until(lambda: engine.read_entity_state(tally) is not None, timeout=TIMEOUT)
    found = engine.read_entity_state(tally)
    assert found is not None and found.entity_id == EntityId("tally", "x") and found.state == "5"
    assert wait_until(lambda: len(engine.list_entities(EntityQuery())[0]) == 2, timeout=TIMEOUT)
    listed, token = engine.list_entities(EntityQuery(entity_name="TALLY", fetch_state=True))
    assert token is None and sorted((e.entity_id.key, e.state) for e in listed) == [("x", "5"), ("y", "1")]
    page, token = engine.list_entities(EntityQuery(page_size=1))
    assert len(page) == 1 and token is not None and page[0].state is None  # state only with fetch_state
    rest, _ = engine.list_entities(EntityQuery(page_size=1, continuation_token=token))
    assert {page[0].entity_id.key, rest[0].entity_id.key} == {"x", "y"}
    with pytest.raises(FunctionNotFoundError, match="'nope'"):
        engine.signal_entity(EntityId.of("nope", "k"), "add", None)
    with pytest.raises(ValueError, match="must not contain"):
        engine.signal_entity(EntityId.of("tally", "a/b"), "add", None)


def test_a_python_entity_deleted_with_destruct_on_exit_still_reads_with_a_null_state(engines: Engines) -> None:
    # The Python SDK reports a deleted entity's state as the JSON text "null", and DTFx's entity query takes
    # any non-null state text as existing; only the status ({} after the delete) says it is gone.
    engine = engines.start()
    entity = EntityId.of("tally", "gone")
    engine.signal_entity(entity, "add", sdk_input(5))
    engine.signal_entity(entity, "delete", None)
    assert wait_until(lambda: (row := engine.get_status("@tally@gone")) is not None and row.custom_status == "{}")
    found = engine.read_entity_state(entity)
    assert found is not None and found.state == "null"
    assert engine.list_entities(EntityQuery(entity_name="tally"))[0] == []  # not listed without fetchState


@pytest.mark.parametrize(
    ("nudge", "mode"),
    [(True, SchedulingMode.SHIM), (False, SchedulingMode.SHIM), (False, SchedulingMode.IDEAL)],
    ids=["shim-already-due-timer", "shim-naive", "ideal"],
)
def test_call_entity_inside_task_any_under_the_shim(engines: Engines, nudge: bool, mode: SchedulingMode) -> None:
    engine = engines.start(scheduling_mode=mode)
    keys = [f"w{i}" for i in range(7)]
    spec = {"keys": keys, "k": 3, "nudge": nudge}
    results = engines.finish(engine, engine.start_new("window_calls", input_json=client_input(spec)))
    assert results == [1] * len(keys)
    for key in keys:
        # The last answer can arrive before its entity's row is written (answers first, then history and row).
        assert wait_until(lambda k=key: engine.read_entity_state(EntityId.of("tally", k)) is not None)  # type: ignore[misc]
        state = engine.read_entity_state(EntityId.of("tally", key))
        assert state is not None and state.state == "1"  # each call ran exactly once


def test_an_entity_call_raced_against_a_timer(engines: Engines) -> None:
    engine = engines.start()
    engine.signal_entity(EntityId.of("tally", "t"), "add", sdk_input(9))
    assert engines.finish(engine, engine.start_new("call_with_timeout", input_json=client_input("t"))) == 9


def test_the_separate_entity_ready_queue_feeds_its_own_dispatcher(engines: Engines) -> None:
    engine = engines.start(use_separate_queue_for_entity_work_items=True, entity_worker_threads=2)
    answers = engines.finish(engine, engine.start_new("adder", input_json=client_input({"key": "s", "n": 4})))
    assert answers == [1, 2, 3, 4]
    threads = {thread for entity, _, thread in engines.recorder.batches if entity == "@tally@s"}
    assert threads and all(name.startswith("dl-entity-") for name in threads)


def sdk_input(value: object) -> str:
    """The request input a Python ``client.signal_entity(id, op, value)`` produces: the SDK posts
    ``json.dumps(value)`` as JSON, so the input is JSON text of a JSON string (``get_input`` decodes both)."""
    return json.dumps(json.dumps(value))


def _ledger(engine: Engine, key: str) -> list[str] | None:
    found = engine.read_entity_state(EntityId.of("ledger", key))
    return None if found is None else json.loads(found.state or "null")


def _row_state(engine: Engine, instance_id: str) -> str | None:
    """The entity state its Instances row holds (``None`` without a row)."""
    row = engine.get_status(instance_id)
    return None if row is None else json.loads(row.input or "{}").get("state")
