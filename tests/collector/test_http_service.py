"""The collections API logic over a fake Durable client (the triggers only wrap these functions)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from http_api import follow_service, retry_chain, service
from orchestrators import follow as follow_orchestrator
from shared import names
from shared.audit.tenant_lookup import TenantNotFoundError
from shared.budget.machine import Budget, BudgetState
from shared.budget.wire import BudgetRequest
from shared.chain_claim import Claim, ClaimState
from shared.follow import plan, state
from shared.models import Chunk
from shared.requests import admission
from shared.settings import Settings
from shared.sinks.base import ChunkSink
from shared.sinks.memory import MemorySink
from shared.window.machine import CollectionSpec

NOW = datetime(2024, 11, 18, 12, 0, tzinfo=UTC)
GUID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
DIRECTORY = {"contoso.onmicrosoft.com": GUID, "contoso.com": GUID}
"""The fake authority's tenants (the real resolver against the emulator: tests/audit/test_tenant_lookup.py)."""


async def resolve(tenant: str) -> str:
    if tenant == GUID or tenant in DIRECTORY:
        return DIRECTORY.get(tenant, tenant)
    raise TenantNotFoundError(tenant, "AADSTS90002")


BODY = {
    "tenantId": "contoso.onmicrosoft.com",
    "startDate": "2024-11-17T10:00:00Z",
    "endDate": "2024-11-18T10:00:00Z",
    "intervalMinutes": 240,
    "maxConcurrency": 2,
}


@dataclass
class FakeClient:
    instances: dict[str, SimpleNamespace] = field(default_factory=dict)
    started: list[tuple[str, str, Any]] = field(default_factory=list)
    entities: dict[tuple[str, str], Any] = field(default_factory=dict)
    signals: list[tuple[str, str, str, Any]] = field(default_factory=list)
    terminated: list[tuple[str, str]] = field(default_factory=list)
    clock: datetime = NOW
    budget_capacity: int = 3

    async def start_new(self, orchestration_function_name: str, instance_id: str | None, client_input: Any) -> str:
        assert instance_id is not None
        existing = self.instances.get(instance_id)
        if existing is not None and existing.runtime_status.value in ("Pending", "Running", "Suspended"):
            # host.json overridableExistingInstanceStates=NonRunningStates: the extension refuses the start.
            raise RuntimeError(f"An instance with ID '{instance_id}' already exists and is running")
        self.started.append((orchestration_function_name, instance_id, json.loads(json.dumps(client_input))))
        self.instances[instance_id] = SimpleNamespace(
            runtime_status=SimpleNamespace(value="Pending"), input_=client_input, output=None, custom_status=None
        )
        return instance_id

    async def get_status(self, instance_id: str, show_history: bool = False, show_history_output: bool = False,
                         show_input: bool = False) -> Any:  # fmt: skip
        return self.instances.get(instance_id, SimpleNamespace(runtime_status=None))

    async def signal_entity(self, entity: Any, operation: str, operation_input: Any = None) -> None:
        """Runs the operation at once, as the entity's trigger does (``shared.chain_claim`` /
        ``shared.budget.machine``)."""
        key = (entity.name, entity.key)
        self.signals.append((*key, operation, operation_input))
        if entity.name == names.ENTITY_START_CLAIM:
            state = ClaimState.from_json(self.entities.get(key))
            state.apply(Claim.parse(operation_input), self.clock)
            self.entities[key] = state.to_json()
        elif entity.name == names.ENTITY_BUDGET:
            budget = Budget(BudgetState.from_json(self.entities.get(key)))
            budget.handle(BudgetRequest.parse(operation, operation_input), self.clock, self.budget_capacity)
            self.entities[key] = budget.state.to_json()

    async def read_entity_state(self, entity: Any) -> Any:
        state = self.entities.get((entity.name, entity.key))
        return SimpleNamespace(entity_exists=state is not None, entity_state=state)

    async def terminate(self, instance_id: str, reason: str) -> None:
        self.terminated.append((instance_id, reason))
        self.instances[instance_id].runtime_status = SimpleNamespace(value="Terminated")
        self.instances[instance_id].output = json.dumps(reason)


def call(coro: Any) -> service.ApiResponse:
    return asyncio.run(coro)  # type: ignore[no-any-return]


def start(client: FakeClient, body: Any, sink: ChunkSink | None = None) -> service.ApiResponse:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return call(
        service.start_collection(
            client, raw, Settings(), NOW, lambda: "generated0001", sink=sink or MemorySink(), resolve=resolve
        )
    )


def test_start_plans_and_starts_the_orchestrator() -> None:
    client = FakeClient()
    response = start(client, BODY)
    assert response.status == 202 and response.instance_id == "generated0001"
    assert response.body["chunks"] == 6
    ((name, instance_id, payload),) = client.started
    assert (name, instance_id) == (names.ORCHESTRATOR_COLLECT, "generated0001")
    assert payload["spec"]["options"]["max_concurrency"] == 2
    assert payload["spec"]["plan"]["intervalSeconds"] == 240 * 60
    assert payload["state"] is None


def test_the_spec_carries_the_tenant_guid_whatever_spelling_the_request_used() -> None:
    client = FakeClient()
    for index, tenant in enumerate(("contoso.onmicrosoft.com", "contoso.com", GUID.upper())):
        assert start(client, {**BODY, "tenantId": tenant, "collectionId": f"spelled-{index}"}).status == 202
    assert [payload["spec"]["tenantGuid"] for _, _, payload in client.started] == [GUID] * 3
    assert [payload["spec"]["tenantId"] for _, _, payload in client.started][:2] == ["contoso.onmicrosoft.com",
                                                                                    "contoso.com"]  # fmt: skip
    retried = client.started[0][1]
    finish(client, retried, WITH_FAILURE)
    assert retry(client, retried).status == 202
    assert client.started[-1][2]["spec"]["tenantGuid"] == GUID  # a retry link keeps its parent's GUID


def test_a_domain_the_authority_does_not_know_is_a_400_naming_tenant_id_and_starts_nothing() -> None:
    client = FakeClient()
    response = start(client, {**BODY, "tenantId": "no-such-tenant.onmicrosoft.com"})
    assert response.status == 400, response.body
    assert (response.body["error"]["field"], response.body["error"]["rule"]) == ("tenantId", "not_found")
    assert "AADSTS90002" in response.body["error"]["message"] and client.started == []


def test_a_retry_of_a_collection_started_before_guids_were_carried_resolves_its_tenant() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "older"})
    del client.instances["older"].input_["spec"]["tenantGuid"]  # an input written before the field existed
    assert CollectionSpec.from_json(client.instances["older"].input_["spec"]).budget_tenant == BODY["tenantId"]
    finish(client, "older", WITH_FAILURE)
    assert retry(client, "older").status == 202
    assert client.started[-1][2]["spec"]["tenantGuid"] == GUID


def test_invalid_body_starts_nothing() -> None:
    client = FakeClient()
    response = start(client, {**BODY, "maxConcurrency": 99})
    assert response.status == 400 and response.body["error"]["field"] == "maxConcurrency"
    assert start(client, b"{not json").body["error"]["rule"] == "json"
    assert client.started == []


def test_same_collection_id_starts_only_once() -> None:
    client = FakeClient()
    first = start(client, {**BODY, "collectionId": "case-1"})
    second = start(client, {**BODY, "collectionId": "case-1"})
    assert (first.status, second.status) == (202, 200)
    assert second.body["existing"] is True and len(client.started) == 1


def test_summary_shows_progress_then_results() -> None:
    client = FakeClient()
    assert call(service.collection_summary(client, "nope")).status == 404
    start(client, {**BODY, "collectionId": "case-2"})
    client.instances["case-2"].runtime_status = SimpleNamespace(value="Running")
    client.instances["case-2"].custom_status = {"total": 6, "completed": 2, "percent": 33.3, "windowsInFlight": ["a/b"]}
    running = call(service.collection_summary(client, "case-2")).body
    assert running["status"] == "Running" and running["progress"]["completed"] == 2
    assert running["windowsInFlight"] == ["a/b"]
    client.instances["case-2"].runtime_status = SimpleNamespace(value="Completed")
    client.instances["case-2"].output = json.dumps(
        {
            "status": "CompletedWithFailures",
            "total": 6,
            "completed": 5,
            "failed": 1,
            "records": 42,
            "manifest": "memory://m",
            "failures": [
                {"chunk": {"start": "s", "end": "e"}, "kind": "transient", "message": "503 x4", "attempts": 4}
            ],
        }
    )
    done = call(service.collection_summary(client, "case-2")).body
    assert done["status"] == "CompletedWithFailures" and done["records"] == 42
    (failure,) = done["failures"]
    assert failure == {"window": "s/e", "kind": "transient", "reason": "503 x4", "attempts": 4, "fix": failure["fix"]}
    assert "maxConcurrency" in failure["fix"]  # what to do about throttling
    assert done["manifest"] == "memory://m"


FAILED = {"chunk": {"start": "2024-11-17T14:00:00Z", "end": "2024-11-17T18:00:00Z"}, "kind": "t", "message": "m",
          "attempts": 4}  # fmt: skip
WITH_FAILURE = {"status": "CompletedWithFailures", "failures": [FAILED], "remaining": {"cursor": 6}}


def retry(client: FakeClient, collection_id: str, sink: ChunkSink | None = None) -> service.ApiResponse:
    return call(
        retry_chain.retry_failed(client, collection_id, NOW, sink or MemorySink(), settings=Settings(), resolve=resolve)
    )


def finish(client: FakeClient, instance_id: str, output: Any) -> None:
    client.instances[instance_id].runtime_status = SimpleNamespace(value="Completed")
    client.instances[instance_id].output = output


def test_retry_failed_starts_a_linked_collection_of_only_the_failed_chunks() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "case-3"})
    assert retry(client, "missing").status == 404
    client.instances["case-3"].runtime_status = SimpleNamespace(value="Running")
    assert retry(client, "case-3").status == 409
    finish(client, "case-3", {"status": "Completed", "failures": [], "remaining": {"cursor": 6}})
    assert retry(client, "case-3").status == 400
    finish(client, "case-3", WITH_FAILURE)
    response = retry(client, "case-3")
    assert response.status == 202 and response.body["parentCollectionId"] == "case-3"
    _, retry_id, payload = client.started[-1]
    assert retry_id == "case-3-retry-1" == response.instance_id
    assert payload["spec"]["explicit"] == [{"start": "2024-11-17T14:00:00Z", "end": "2024-11-17T18:00:00Z", "depth": 0}]
    assert payload["spec"]["parentCollectionId"] == "case-3" and payload["spec"]["plan"] is None
    assert (payload["request"]["retryOf"], payload["request"]["retryRoot"]) == ("case-3", "case-3")


def test_retry_failed_while_the_retry_runs_answers_with_it_and_starts_nothing() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "case-4"})
    finish(client, "case-4", WITH_FAILURE)
    assert retry(client, "case-4").status == 202
    for _ in range(3):
        again = retry(client, "case-4")
        assert (again.status, again.instance_id, again.body["existing"]) == (200, "case-4-retry-1", True)
        assert again.body["parentCollectionId"] == "case-4" and again.body["chunks"] == 1
    assert len(client.started) == 2  # the collection and one retry
    assert retry(client, "case-4-retry-1").status == 409  # the running retry itself cannot be retried yet


def test_retry_failed_after_the_retry_finished_retries_what_it_still_failed_as_the_next_link() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "case-5"})
    finish(client, "case-5", WITH_FAILURE)
    retry(client, "case-5")
    finish(client, "case-5-retry-1", WITH_FAILURE)  # the same window failed again
    for named in ("case-5", "case-5-retry-1"):
        response = retry(client, named)
        assert (response.status, response.instance_id) in ((202, "case-5-retry-2"), (200, "case-5-retry-2"))
        assert response.body["parentCollectionId"] == "case-5-retry-1"
    _, retry_id, payload = client.started[-1]
    assert retry_id == "case-5-retry-2" and len(client.started) == 3
    assert (payload["request"]["retryRoot"], payload["request"]["retryGeneration"]) == ("case-5", 2)
    # the root's range travels from link to link: each link's manifest proves it over the whole chain
    root_range = [{"start": BODY["startDate"], "end": BODY["endDate"]}]
    assert [p["request"]["rootRanges"] for _, _, p in client.started[1:]] == [root_range, root_range]
    headline = {"root": "case-5", "links": 3, "totals": {"chunks": 6, "records": 9, "bytes": 99, "incompleteChunks": 0},
                "counts": {"gaps": 0, "failures": 0, "expired": 0, "superseded": 0}}  # fmt: skip
    finish(client, "case-5-retry-2", {"status": "Completed", "failures": [], "remaining": {"cursor": 1},
                                      "chain": headline})  # fmt: skip
    assert call(service.collection_summary(client, "case-5-retry-2")).body["chain"] == headline
    assert call(service.collection_summary(client, "case-5")).body["chain"] is None  # a root has no chain section
    done = retry(client, "case-5")
    assert done.status == 400 and "case-5-retry-2 collected everything" in done.body["error"]["message"]


def test_a_terminated_retry_is_retried_whole() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "case-6"})
    finish(client, "case-6", WITH_FAILURE)
    retry(client, "case-6")
    client.instances["case-6-retry-1"].runtime_status = SimpleNamespace(value="Terminated")
    response = retry(client, "case-6")
    assert (response.status, response.instance_id) == (202, "case-6-retry-2")
    assert client.started[-1][2]["spec"]["explicit"] == client.started[-2][2]["spec"]["explicit"]


def test_a_chain_link_that_is_not_a_retry_of_the_previous_one_is_refused() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "case-7"})
    finish(client, "case-7", WITH_FAILURE)
    client.instances["case-7-retry-1"] = SimpleNamespace(
        runtime_status=SimpleNamespace(value="Completed"), input_={"spec": {}, "request": {}}, output=None
    )
    response = retry(client, "case-7")
    assert response.status == 409 and response.body["error"]["rule"] == "chain_broken"


def test_retry_ids_are_deterministic_valid_ids_even_for_long_roots() -> None:
    long_root = "a" * 64
    retry_id = names.retry_collection_id(long_root, 12)
    assert names.is_safe_id(retry_id) and retry_id.endswith("-retry-12")
    assert retry_id == names.retry_collection_id(long_root, 12) != names.retry_collection_id("a" * 63 + "b", 12)
    assert names.is_retry_id(retry_id) and not names.is_retry_id("incident-retry")
    with pytest.raises(ValueError):
        names.retry_collection_id("x", 0)


def test_a_request_cannot_take_a_retry_id() -> None:
    client = FakeClient()
    response = start(client, {**BODY, "collectionId": "incident-retry-1"})
    assert response.status == 400 and response.body["error"] == {
        "field": "collectionId",
        "rule": "reserved",
        "message": "collectionId may not end in -retry-<number>: retry-failed names its retries so",
    }
    assert client.started == []


@dataclass
class RacingClient(FakeClient):
    """A second POST with the same id started the instance between our status check and our start."""

    checks: int = 0

    async def get_status(self, instance_id: str, show_history: bool = False, show_history_output: bool = False,
                         show_input: bool = False) -> Any:  # fmt: skip
        self.checks += 1
        if self.checks == 1:
            return SimpleNamespace(runtime_status=None)
        return SimpleNamespace(runtime_status=SimpleNamespace(value="Running"))

    async def start_new(self, orchestration_function_name: str, instance_id: str | None, client_input: Any) -> str:
        raise RuntimeError("An instance with ID 'same' already exists and is running")


def test_a_same_id_post_that_loses_the_start_race_answers_with_the_existing_collection() -> None:
    response = start(RacingClient(), {**BODY, "collectionId": "same"})
    assert (response.status, response.body["existing"], response.instance_id) == (200, True, "same")


def test_a_start_failure_without_an_existing_instance_is_not_hidden() -> None:
    class Broken(FakeClient):
        async def start_new(self, orchestration_function_name: str, instance_id: str | None, client_input: Any) -> str:
            raise RuntimeError("task hub unavailable")

    with pytest.raises(RuntimeError, match="task hub unavailable"):
        start(Broken(), BODY)


def test_host_json_refuses_to_restart_a_running_instance_with_the_same_id() -> None:
    from pathlib import Path

    host = json.loads((Path(__file__).parents[2] / "host.json").read_text())
    assert host["extensions"]["durableTask"]["overridableExistingInstanceStates"] == "NonRunningStates"


# -- hostile bodies (issue 12, items 2 and 3): each is a 400 naming the field and rule, and starts nothing --
def _nested(depth: int, opener: str, closer: str) -> bytes:
    return (opener * depth + closer * depth).encode()


def _with_keyword(raw_value: str) -> bytes:
    """A valid body whose ``filters.keyword`` value is spliced in as raw JSON text."""
    return json.dumps({**BODY, "filters": {"keyword": "x"}}).replace('"x"', raw_value).encode()


HOSTILE: list[tuple[str, bytes, str, str]] = [
    # A body nested ~1,000 deep made the JSON decoder raise RecursionError: a 500 from the starter.
    ("arrays 1,000 deep", _nested(1000, "[", "]"), "body", "depth"),
    ("objects 1,000 deep", ('{"a":' * 1000 + "1" + "}" * 1000).encode(), "body", "depth"),
    ("arrays 100,000 deep", _nested(100_000, "[", "]"), "body", "depth"),
    ("deep inside a field", _with_keyword("[" * 40 + "]" * 40), "body", "depth"),
    # The last duplicate used to win: a valid tenantId after a hostile one, or the other way round.
    ("duplicate tenantId", b'{"tenantId": "../x", ' + json.dumps(BODY).encode()[1:], "tenantId", "duplicate_key"),
    (
        "duplicate nested key",
        _with_keyword('"a", "keyword": "b"'),
        "filters.keyword",
        "duplicate_key",
    ),
]


@pytest.mark.parametrize(("case", "raw", "field", "rule"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_body_is_a_400_naming_field_and_rule_and_starts_nothing(
    case: str, raw: bytes, field: str, rule: str
) -> None:
    client = FakeClient()
    response = start(client, raw)
    assert response.status == 400, (case, response)
    assert (response.body["error"]["field"], response.body["error"]["rule"]) == (field, rule), case
    assert response.body["error"]["message"]
    assert client.started == []


def test_a_body_just_inside_the_depth_limit_reaches_field_validation() -> None:
    """The depth rule rejects nesting, not objects: a (wrong) nested value within the limit gets the field's rule."""
    deep_but_allowed = [[["x"]]]
    response = start(FakeClient(), {**BODY, "filters": {"operations": deep_but_allowed}})
    assert (response.status, response.body["error"]["field"], response.body["error"]["rule"]) == (
        400,
        "filters.operations",
        "type",
    )


DAYS = 180
LOOKBACK = Settings(max_lookback_days=DAYS)


def test_retry_failed_refuses_windows_past_retention_instead_of_reporting_them_empty() -> None:
    """The service no longer holds records older than its retention: a retry over such a window used to "collect"
    it as 0 records, Completed, with no gap (adversarial review G2)."""
    client = FakeClient()
    start(client, {**BODY, "collectionId": "old-1"})
    finish(client, "old-1", WITH_FAILURE)  # the failed window: 2024-11-17 14:00-18:00
    later = datetime(2024, 11, 17, 16, tzinfo=UTC) + timedelta(days=DAYS)  # the cut-off is now 2024-11-17 16:00
    all_gone = call(
        retry_chain.retry_failed(
            client, "old-1", later + timedelta(hours=4), MemorySink(), settings=LOOKBACK, resolve=resolve
        )
    )
    assert all_gone.status == 400, all_gone.body
    assert (all_gone.body["error"]["field"], all_gone.body["error"]["rule"]) == ("id", "retention")
    assert "2024-11-17T14:00:00Z" in all_gone.body["error"]["message"] and len(client.started) == 1
    partly = call(retry_chain.retry_failed(client, "old-1", later, MemorySink(), settings=LOOKBACK, resolve=resolve))
    assert partly.status == 202, partly.body
    _, _, payload = client.started[-1]
    assert payload["spec"]["explicit"] == [{"start": "2024-11-17T16:00:00Z", "end": "2024-11-17T18:00:00Z", "depth": 0}]
    expired = [{"start": "2024-11-17T14:00:00Z", "end": "2024-11-17T16:00:00Z"}]
    assert partly.body["expired"] == payload["request"]["expired"] == expired  # said, never counted as collected
    assert call(service.collection_summary(client, "old-1-retry-1")).body["expired"] == expired
    assert payload["request"]["chainExpired"] == expired
    # the next link's expired windows are its own; the chain's union travels on
    finish(client, "old-1-retry-1", {**WITH_FAILURE, "failures": [
        {**FAILED, "chunk": {"start": "2024-11-17T16:00:00Z", "end": "2024-11-17T18:00:00Z"}}]})  # fmt: skip
    later_still = call(
        retry_chain.retry_failed(
            client, "old-1", later + timedelta(hours=1), MemorySink(), settings=LOOKBACK, resolve=resolve
        )
    )
    assert later_still.status == 202, later_still.body
    request = client.started[-1][2]["request"]
    assert request["expired"] == [{"start": "2024-11-17T16:00:00Z", "end": "2024-11-17T17:00:00Z"}]
    assert request["chainExpired"] == [{"start": "2024-11-17T14:00:00Z", "end": "2024-11-17T17:00:00Z"}]


def test_a_window_ending_exactly_at_the_retention_cut_off_is_expired_whole_and_one_starting_there_is_kept_whole() -> (
    None
):
    """Issue 18.9: the boundaries of ``split_at_retention`` (the cut-off is the oldest instant the service holds)."""
    cutoff = datetime(2024, 11, 17, 14, tzinfo=UTC)
    before, after = Chunk(cutoff - timedelta(hours=4), cutoff), Chunk(cutoff, cutoff + timedelta(hours=4))
    assert retry_chain.split_at_retention([before, after], cutoff) == ([after], [before])  # no empty part either side
    client = FakeClient()
    start(client, {**BODY, "collectionId": "edge"})
    finish(client, "edge", {**WITH_FAILURE, "failures": [{**FAILED, "chunk": before.span_json()}]})
    at_cutoff = call(
        retry_chain.retry_failed(client, "edge", cutoff + timedelta(days=DAYS), MemorySink(), settings=LOOKBACK,
                                 resolve=resolve)
    )  # fmt: skip
    assert (at_cutoff.status, at_cutoff.body["error"]["rule"]) == (400, "retention"), at_cutoff.body
    assert len(client.started) == 1  # nothing started: an empty window would have "collected" 0 records


def follow(client: FakeClient, body: dict[str, Any], settings: Settings | None = None) -> service.ApiResponse:
    raw = json.dumps(body).encode()
    return call(
        follow_service.start_follow(client, raw, settings or Settings(), NOW, sink=MemorySink(), resolve=resolve)
    )


FOLLOW = {"tenantId": "contoso.onmicrosoft.com", "startDate": "2024-11-18T00:00:00Z", "intervalMinutes": 60}
FOLLOW["feed"] = False  # a search follower: the fake settings hold no app to check the feed with


def test_a_follower_is_keyed_and_budgeted_by_the_tenant_guid_whatever_spelling_and_refuses_an_unknown_tenant() -> None:
    """Issue 29 item 2: follows never resolved the tenant, so a GUID follower and a domain follower of one tenant were
    two followers, their passes keyed the budget by the spelling, and an unknown domain was accepted."""
    client = FakeClient()
    unknown = follow(client, {**FOLLOW, "tenantId": "nobody.onmicrosoft.com"})
    assert (unknown.status, unknown.body["error"]["field"], unknown.body["error"]["rule"]) == (
        400,
        "tenantId",
        "not_found",
    )
    assert client.started == []
    first = follow(client, FOLLOW)
    assert first.status == 202, first.body
    (_, follow_id, payload), *_ = client.started
    assert follow_id == first.body["followId"] == state.follow_id(GUID, "graph", {})
    spec = state.FollowSpec.from_json(payload["spec"])
    assert (spec.tenant_id, spec.tenant_guid) == ("contoso.onmicrosoft.com", GUID)  # output keeps the spelling
    for spelling in (GUID, "contoso.com"):
        again = follow(client, {**FOLLOW, "tenantId": spelling})
        assert (again.status, again.body["followId"], again.body["existing"]) == (200, follow_id, True)
    assert len(client.started) == 1
    due = plan.plan(spec, state.FollowState(covered_until=spec.start), NOW)[0]
    pass_spec = CollectionSpec.from_json(follow_orchestrator.pass_input(spec, due, NOW, "ab" * 16)["spec"])
    assert pass_spec.budget_tenant == GUID and pass_spec.tenant_id == "contoso.onmicrosoft.com"


def test_a_new_follow_key_is_claimed_once_and_what_starts_is_sealed() -> None:
    client = FakeClient()
    keyed = Settings(budget_secret="f" * 40)
    assert follow(client, FOLLOW, keyed).status == 202
    claims = [s for s in client.signals if s[0] == names.ENTITY_START_CLAIM]
    (_, key, operation, claim), *_ = claims
    assert (key, operation, claim["generation"]) == (client.started[0][1], "claim", 0) and claim["mac"]
    payload = client.started[0][2]
    assert admission.unsealed_reason("f" * 40, client.started[0][1], payload) is None
    client.instances[client.started[0][1]].runtime_status = SimpleNamespace(value="Completed")
    client.instances[client.started[0][1]].input_ = {**payload, "seal": "0" * 64}  # a forged state, not resumed
    forged = follow(client, FOLLOW, keyed)
    assert (forged.status, forged.body["error"]["rule"]) == (409, "not_sealed") and len(client.started) == 1
