"""Entity ids, .NET values and message JSON: the shapes the extension writes (docs/local-host.md, Entities)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from durable_local.entities.batch import EntityBatchError, batch_request, parse_batch_result
from durable_local.entities.dotnet import (
    deterministic_guid,
    format_datetime,
    from_ticks,
    parse_datetime,
    to_ticks,
)
from durable_local.entities.ids import EntityId, check_signal_key, is_entity_instance
from durable_local.entities.messages import RequestMessage, ResponseMessage, request_id_of
from durable_local.entities.state import SchedulerState, entity_state_of, status_says_exists

T = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def test_entity_ids_lower_case_the_name_and_keep_the_key() -> None:
    entity = EntityId.of("Counter", "Key@With@At")
    assert entity.scheduler_id == "@counter@Key@With@At"
    assert EntityId.from_scheduler_id("@counter@Key@With@At") == entity  # split at the second '@'
    assert is_entity_instance("@counter@x") and not is_entity_instance("counter") and not is_entity_instance("")
    with pytest.raises(ValueError, match="entity name"):
        EntityId.of("", "k")
    with pytest.raises(ValueError, match="not an entity instance id"):
        EntityId.from_scheduler_id("@nokey")


@pytest.mark.parametrize("key", ["a/b", "a\\b", "a#b", "a?b", "a\nb", "a\x00b"])
def test_signal_keys_with_reserved_characters_are_refused(key: str) -> None:
    with pytest.raises(ValueError, match=r"must not contain /, \\, #, \?, or control characters"):
        check_signal_key(key)
    check_signal_key("plain-key with spaces")


def test_datetimes_round_trip_as_newtonsoft_writes_them() -> None:
    ticks = to_ticks(T)
    assert format_datetime(ticks) == "2024-05-06T07:08:09.123456Z"  # fraction without trailing zeros
    assert format_datetime(to_ticks(T.replace(microsecond=0))) == "2024-05-06T07:08:09Z"
    assert format_datetime(0) == "0001-01-01T00:00:00"  # DateTime.MinValue has no kind, no Z
    assert format_datetime(ticks + 1) == "2024-05-06T07:08:09.1234561Z"  # 100 ns resolution
    assert parse_datetime(format_datetime(ticks + 1)) == ticks + 1
    assert parse_datetime("2024-05-06T09:08:09.123456+02:00") == ticks
    assert from_ticks(ticks) == T


def test_request_ids_are_deterministic_uuid5_values() -> None:
    first = deterministic_guid("inst", T, 0)
    assert first == deterministic_guid("inst", T, 0)  # a replay makes the same id
    assert first != deterministic_guid("inst", T, 1) != deterministic_guid("inst", T + timedelta(seconds=1), 0)
    parsed = uuid.UUID(first)
    assert parsed.version == 5
    name = "inst_2024-05-06T07:08:09.1234560Z_0"  # instance id, current time ("o" format), counter
    assert first == str(uuid.uuid5(uuid.UUID("9e952959-5e33-4daf-827f-2fa12937b875"), name))


def test_request_message_json_omits_defaults_like_the_extension() -> None:
    client_signal = RequestMessage(id="1", operation="add", is_signal=True, input='"5"')
    assert client_signal.to_json() == {
        "op": "add",
        "signal": True,
        "input": '"5"',
        "id": "1",
        "Timestamp": "0001-01-01T00:00:00",
        "Predecessor": "0001-01-01T00:00:00",
    }
    call = RequestMessage(
        id="2", operation="get", parent_instance_id="o", parent_execution_id="e", timestamp=to_ticks(T), position=0
    )
    data = call.to_json()
    assert list(data) == ["op", "id", "parent", "parentExecution", "Timestamp", "Predecessor"]
    assert RequestMessage.from_text(json.dumps(data)) == call
    assert request_id_of(call.to_text()) == "2"
    assert ResponseMessage('"boom"', "Error").to_json() == {"result": '"boom"', "exceptionType": "Error"}
    assert ResponseMessage("5").to_json() == {"result": "5"}


def test_scheduler_state_json_and_status() -> None:
    state = SchedulerState(exists=True, state="7")
    assert state.to_json() == {"exists": True, "state": "7", "sorter": {}}
    assert json.loads(state.status_text()) == {"entityExists": True}
    assert SchedulerState().status_text() == "{}"
    assert SchedulerState.from_text(state.to_text()) == state
    assert SchedulerState.from_text(None) == SchedulerState()
    assert entity_state_of(state.to_text()) == "7" and entity_state_of('{"sorter":{}}') is None
    assert status_says_exists('{"entityExists":true}') and not status_says_exists("{}")


def test_batch_request_has_exactly_the_keys_the_python_sdk_accepts() -> None:
    ops = [RequestMessage(id="1", operation="add", input='"3"', is_signal=True)]
    request = json.loads(batch_request(EntityId.of("Counter", "k"), exists=False, state=None, operations=ops))
    assert request == {
        "self": {"name": "counter", "key": "k"},
        "exists": False,
        "state": None,
        "batch": [{"name": "add", "input": '"3"', "isSignal": True}],
    }


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("not json", "valid JSON schema"),
        ("[]", "valid JSON schema"),
        ('{"results": [], "entityExists": true}', "0 results for a batch of 1"),
        ('{"results": [5]}', "valid JSON schema"),
    ],
)
def test_an_unreadable_batch_result_aborts_the_batch(answer: str, reason: str) -> None:
    with pytest.raises(EntityBatchError, match=reason):
        parse_batch_result(answer, 1)


def test_the_sender_of_a_message_survives_the_queue_codec() -> None:
    from durable_local.history import event_raised
    from durable_local.model import TaskMessage
    from durable_local.storage.codec import decode_task_message, encode_task_message

    message = TaskMessage("orch", "e1", event_raised(timestamp=T, name="x", input=None), 3, sender="@counter@k")
    assert decode_task_message(encode_task_message(message)) == message
    plain = TaskMessage("orch", None, event_raised(timestamp=T, name="x", input=None))
    assert "sender" not in encode_task_message(plain)  # rows written before entities decode unchanged
