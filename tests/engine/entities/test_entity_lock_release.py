"""A lock is released only by its holder (issue 18, item 9: "an entity lock released by a non-holder").

The extension's ``EntityMiddleware`` unlocks on a ``release`` message only when its ``parent`` is the instance the
entity is locked by (``schedulerState.LockedBy == message.ParentInstanceId``); a release from anyone else is ignored,
so the holder's critical section cannot be opened by another orchestration (or by a stale release of an earlier
lock of the same entity).
"""

from __future__ import annotations

import json
from datetime import timedelta

from durable_local.entities.dotnet import ticks_of, to_ticks
from durable_local.entities.ids import EntityId
from durable_local.entities.messages import RequestMessage
from durable_local.history import event_raised
from durable_local.model import TaskMessage
from durable_local.replay.api import EpisodeResult

from .helpers import T0, Caller, episode, state_of

ENTITY = "@counter@k"


def _locked_by_holder() -> EpisodeResult:
    holder = Caller("holder", "hx")
    lock = RequestMessage(id="lock-1", parent_instance_id="holder", parent_execution_id="hx")
    lock.lockset = [EntityId.of("counter", "k")]
    holder.sorter.label_outgoing(lock, ENTITY, to_ticks(T0) + 1000, ticks_of(timedelta(minutes=30)))
    request = TaskMessage(ENTITY, None, event_raised(timestamp=T0, name="op", input=lock.to_text()), sender="holder")
    other = Caller("other", "ox")
    return episode(ENTITY, [request, other.request(ENTITY, "add", 5, signal=True)])


def _release(parent: str) -> TaskMessage:
    body = json.dumps({"parent": parent, "id": "lock-1"})
    return TaskMessage(ENTITY, None, event_raised(timestamp=T0, name="release", input=body))


def test_a_release_from_another_instance_leaves_the_lock_and_the_queue_alone() -> None:
    locked = _locked_by_holder()
    assert state_of(locked)["lockedBy"] == "holder" and len(state_of(locked)["queue"]) == 1
    forged = episode(ENTITY, [_release("other")], past=locked.history)
    state = state_of(forged)
    assert state.get("lockedBy") == "holder"  # still locked: only the holder unlocks
    assert len(state.get("queue", [])) == 1 and "state" not in state  # the other's operation still waits
    released = episode(ENTITY, [_release("holder")], past=forged.history)
    assert "lockedBy" not in state_of(released) and state_of(released)["state"] == "5"
