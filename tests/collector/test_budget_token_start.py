"""The HTTP starter gives every collection, and every retry link, a budget token of its own (issue 18.1)."""

from __future__ import annotations

import json

from http_api import retry_chain, service
from shared.budget.token import collection_token
from shared.settings import Settings
from shared.sinks.memory import MemorySink
from tests.collector.test_http_service import BODY, NOW, WITH_FAILURE, FakeClient, call, finish, resolve

SECRET = "k" * 40
KEYED = Settings(budget_secret=SECRET)


def test_each_start_and_each_retry_link_carries_the_token_of_its_own_id() -> None:
    client = FakeClient()
    raw = json.dumps({**BODY, "collectionId": "case-7"}).encode()
    started = service.start_collection(client, raw, KEYED, NOW, lambda: "x", sink=MemorySink(), resolve=resolve)
    assert call(started).status == 202
    finish(client, "case-7", WITH_FAILURE)
    retried = call(retry_chain.retry_failed(client, "case-7", NOW, MemorySink(), settings=KEYED, resolve=resolve))
    assert retried.status == 202
    tokens = {instance: payload.get("budgetToken") for _, instance, payload in client.started}
    assert tokens == {
        "case-7": collection_token(SECRET, "case-7"),
        "case-7-retry-1": collection_token(SECRET, "case-7-retry-1"),
    }
    assert all("budgetToken" not in json.dumps(payload["request"]) for _, _, payload in client.started)


def test_without_a_secret_outside_azure_no_token_is_sent() -> None:
    client = FakeClient()
    raw = json.dumps({**BODY, "collectionId": "case-8"}).encode()
    started = service.start_collection(client, raw, Settings(), NOW, lambda: "x", sink=MemorySink(), resolve=resolve)
    assert call(started).status == 202
    assert "budgetToken" not in client.started[0][2]
