"""The tenant budget entity under misuse (issue 18.1): what someone holding the task hub's system key can send it.

Each test drives the real entity function (``orchestrators.budget_entity.run_operation``) through the real SDK
entity handle in the local engine's entity episodes, as ``test_budget_entity`` does, with hostile inputs: made-up
holders, leases and waits of a day, floods of queue entries, releases of other collections' holders.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from durable_local.replay.api import EpisodeResult
from shared.budget.token import collection_token
from shared.errors import ConfigError
from shared.settings import Settings
from tests.collector.test_budget_entity import ENTITY, Clock, answers, functions
from tests.engine.entities.helpers import T0, Caller, episode, state_of

SECRET = "s3cr3t-" * 6
RUN = "a1" * 16
SETTINGS = Settings(budget_exchange=1, budget_lease_seconds=30, budget_poll_seconds=1, budget_secret=SECRET)
DAY = 86_400


def op(holder: str, *, lease: float = 30, wait: float = 1, token: str | None = None, **extra: Any) -> dict[str, Any]:
    collection = holder.partition("/")[0]
    chosen = collection_token(SECRET, collection) if token is None else token
    return {"holder": holder, "leaseSeconds": lease, "waitSeconds": wait, "token": chosen, **extra}


class Budget:
    """One budget entity, operated by several callers one batch at a time."""

    def __init__(self, settings: Settings = SETTINGS) -> None:
        self.clock = Clock()
        self.settings = settings
        self.past: EpisodeResult | None = None
        self.callers: dict[str, Caller] = {}

    def run(self, *requests: tuple[str, str, Any], signal: bool = False) -> list[Any]:
        messages = []
        for caller, operation, value in requests:
            sender = self.callers.setdefault(caller, Caller(caller))
            messages.append(sender.request(ENTITY, operation, value, signal=signal, at=self.clock.now))
        result = episode(
            ENTITY,
            messages,
            past=self.past.history if self.past else None,
            functions=functions(self.clock, self.settings),
        )
        self.past = result
        return [answer for _, answer in answers(result)]

    @property
    def state(self) -> dict[str, Any]:
        assert self.past is not None
        stored = (state_of(self.past) or {}).get("state")  # none at all when every operation so far was refused
        return (json.loads(stored) if stored else None) or {"leases": [], "waiters": []}

    def at(self, seconds: float) -> Budget:
        self.clock.now = T0 + timedelta(seconds=seconds)
        return self


def test_lease_and_wait_are_clamped_to_the_settings_whatever_the_request_says() -> None:
    budget = Budget()
    [granted] = budget.run(("a", "acquire", op("a/0", lease=DAY, wait=DAY)))
    assert granted["granted"] is True
    [lease] = budget.state["leases"]
    assert lease["until"] == "2024-01-01T00:00:30Z"  # the setting's 30 s, not a day
    budget.at(1).run(("b", "acquire", op("b/0", lease=DAY, wait=DAY)))
    [waiter] = budget.state["waiters"]
    assert waiter["until"] <= "2024-01-01T00:00:31Z"  # a waiter that stops asking lapses within a lease


def test_made_up_holders_and_forged_tokens_are_refused() -> None:
    budget = Budget()
    refused = budget.run(
        ("x", "acquire", op("attacker/0", token="0" * 32)),
        ("x", "acquire", op("attacker/1", token="")),
        ("x", "acquire", {**op("attacker/2"), "holder": "victim/2"}),  # attacker's token, another's holder
    )
    assert all(answer[0] == "error" and "token" in answer[1] for answer in refused), refused
    assert budget.state["leases"] == [] and budget.state["waiters"] == []


def test_a_release_of_another_collection_s_holder_is_refused() -> None:
    budget = Budget()
    budget.run(("victim", "acquire", op("victim/0")))
    forged = budget.run(
        ("x", "release", {"holder": "victim/0", "token": collection_token(SECRET, "attacker")}),
        ("x", "release_collection", {"collection": "victim", "token": "f" * 32}),
    )
    assert all(answer[0] == "error" for answer in forged), forged
    assert [lease["holder"] for lease in budget.state["leases"]] == ["victim/0"]
    [released] = budget.run(("victim", "release", {"holder": "victim/0", "token": collection_token(SECRET, "victim")}))
    assert released["released"] is True


def test_one_waiter_per_collection_is_enforced_by_the_entity() -> None:
    budget = Budget()
    budget.run(("a", "acquire", op("a/0")))
    first, *others = budget.run(*(("b", "acquire", op(f"b/{lane}")) for lane in range(5)))
    assert first["granted"] is False and first["position"] == 1
    assert all(answer["granted"] is False and answer["position"] is None for answer in others), others
    assert [w["holder"] for w in budget.state["waiters"]] == ["b/0"]


def test_the_queue_is_bounded_whatever_the_number_of_collections() -> None:
    budget = Budget()
    budget.run(("a", "acquire", op("a/0")))
    budget.run(*((f"c{i}", "acquire", op(f"c{i}/0")) for i in range(400)))
    state = budget.state
    assert 0 < len(state["waiters"]) <= 100, len(state["waiters"])
    assert len(json.dumps(state)) < 20_000


def test_a_renewal_never_takes_a_lapsed_slot_back_silently_and_the_entity_counts_it_lost() -> None:
    budget = Budget()
    budget.run(("a", "acquire", op("a/0")))
    renewal = {"collection": "a", "holders": ["a/0"], "leaseSeconds": 30, "waitSeconds": 1}
    [answer] = budget.at(31).run(("a", "renew_collection", {**renewal, "token": collection_token(SECRET, "a")}))
    assert answer["lost"] == ["a/0"] and answer["renewed"] == 0
    state = budget.state
    assert state["leases"] == [] and state["lost"] == 1  # the holder must ask again: it may not be entitled


def test_hostile_signals_through_the_http_route_change_nothing() -> None:
    """The entity routes send signals: the same checks hold, and a failed signal answers nobody."""
    budget = Budget()
    budget.run(("victim", "acquire", op("victim/0")))
    budget.run(
        ("x", "acquire", op("evil/0", token="1" * 32, lease=DAY)),
        ("x", "release_collection", {"collection": "victim", "token": "2" * 32}),
        signal=True,
    )
    assert [lease["holder"] for lease in budget.state["leases"]] == ["victim/0"]
    assert budget.state["waiters"] == []


def test_the_secret_is_a_setting_of_at_least_32_characters_that_keys_each_collection_s_token() -> None:
    with pytest.raises(ConfigError, match="COLLECTOR_BUDGET_SECRET"):
        Settings.from_env({"COLLECTOR_BUDGET_SECRET": "short"})
    assert Settings.from_env({}).budget_token("c-1", RUN) == ""  # without a secret: unauthenticated
    keyed = Settings.from_env({"COLLECTOR_BUDGET_SECRET": SECRET})
    assert (
        keyed.budget_token("c-1", RUN) == collection_token(SECRET, "c-1", RUN) != collection_token(SECRET, "c-2", RUN)
    )
    assert keyed.budget_token("c-1", RUN) != keyed.budget_token("c-1", "e" * 32)  # each run its own token
    assert keyed.budget_token("c-1", RUN).startswith(RUN) and keyed.budget_token("c-1") == collection_token(
        SECRET, "c-1"
    )
    assert SECRET not in repr(keyed)
    open_budget = Budget(Settings(budget_exchange=1))  # no secret: any token passes, the other rules hold
    [answer] = open_budget.run(("a", "acquire", op("a/0", token="")))
    assert answer["granted"] is True


def test_a_run_that_ended_acquires_nothing_with_its_token_and_another_run_of_the_id_still_can() -> None:
    """Issue 29 item 3: the token of a finished or cancelled run, read from its history, holds no slot."""
    budget = Budget()
    token = collection_token(SECRET, "victim", RUN)
    [granted] = budget.run(("victim", "acquire", op("victim/0", token=token)))
    assert granted["granted"] is True
    forged_close = {"collection": "victim", "token": collection_token(SECRET, "attacker", RUN), "close": True}
    assert budget.run(("x", "release_collection", forged_close))[0][0] == "error"  # closing needs the run's token
    [closed] = budget.run(("victim", "release_collection", {"collection": "victim", "token": token, "close": True}))
    assert closed["released"] == 1 and budget.state["closed"] == [RUN[:16]]
    renewal = {"collection": "victim", "holders": ["victim/0"], "leaseSeconds": 30, "waitSeconds": 1, "token": token}
    squat = budget.at(1).run(
        ("x", "acquire", op("victim/0", token=token)),
        ("x", "acquire", op("victim/1", token=token, lease=DAY)),
        ("x", "renew", op("victim/0", token=token)),
        ("x", "renew_collection", renewal),
    )
    assert [answer.get("refused") for answer in squat] == ["the run this token belongs to has ended (finalized or "
                                                           "cancelled)"] * 4  # fmt: skip
    assert not any(answer.get("granted") for answer in squat) and squat[3]["renewed"] == 0
    state = budget.state
    assert (state["leases"], state["waiters"], state["granted"], state["lost"]) == ([], [], 1, 0)
    [again] = budget.run(("victim", "acquire", op("victim/0", token=collection_token(SECRET, "victim", "b2" * 16))))
    assert again["granted"] is True  # the id's next run (a settle or follower pass) has a token of its own


def test_the_ended_runs_the_budget_remembers_are_bounded() -> None:
    from shared.budget.machine import CLOSED_KEPT

    budget = Budget()
    runs = [f"{i:016x}" * 2 for i in range(CLOSED_KEPT + 20)]
    closing = [{"collection": "c", "token": collection_token(SECRET, "c", run), "close": True} for run in runs]
    budget.run(*(("c", "release_collection", request) for request in closing))
    closed = budget.state["closed"]
    assert len(closed) == CLOSED_KEPT and closed[-1] == runs[-1][:16] and len(json.dumps(closed)) < 12_000
