"""Credentials in library messages never reach results, custom status, manifests or HTTP answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared import names
from shared.errors import SinkError
from shared.models import ActivityError
from shared.redact import redact
from shared.sinks.memory import MemorySink
from tests.collector.fakes import FakeSearchApi, synthetic
from tests.collector.replay_driver import ReplayDriver
from tests.collector.test_orchestrator_replay import START, exchange_activities, orchestrator_handle, payload

SAS_SIG = "sig=AbC%2Bdef123456789secretSIGNATURE%3D"
URL = f"https://acct.blob.core.windows.net/ual-output/t/c/chunks/x.jsonl?comp=block&sv=2023-11-03&{SAS_SIG}"


@pytest.mark.parametrize(
    "message",
    [
        # What urllib3 says when a connection fails: the whole URL, query string included.
        f"HTTPSConnectionPool(host='acct.blob.core.windows.net', port=443): Max retries exceeded with url: {URL}",
        f"Server failed to authenticate the request. url='{URL}'",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0S2V5VmFsdWU=;EndpointSuffix=x",
        "401 from https://graph.microsoft.com: Authorization: Bearer eyJ0eXAiOiJKV1QiLCJhbGciOi.payload.sig",
        "token request failed: client_secret=emulator-Secret~value-123 was rejected",
    ],
)
def test_redact_removes_credentials_and_keeps_the_rest(message: str) -> None:
    cleaned = redact(message)
    for secret in ("secretSIGNATURE", "c2VjcmV0S2V5VmFsdWU", "eyJ0eXAiOiJKV1Qi", "emulator-Secret~value-123"):
        assert secret not in cleaned
    assert "<redacted>" in cleaned
    assert cleaned[:12] == message[:12]  # the explanation stays readable


def test_text_without_credentials_is_unchanged() -> None:
    text = "Graph audit log query API GET 503 ServiceUnavailable: try later (https://graph.microsoft.com/beta)"
    assert redact(text) == text
    aad = "AADSTS7000215: the client secret is invalid; check setting client_secret (AUDIT_CLIENT_SECRET). code: 7"
    assert redact(aad) == aad


def test_activity_errors_from_exceptions_are_redacted() -> None:
    error = ActivityError.from_exception(SinkError(f"cannot write: {URL}"))
    assert "secretSIGNATURE" not in error.message and error.message.startswith("cannot write: https://acct.blob")


def test_a_crashing_activity_leaks_no_sas_into_the_orchestration_output() -> None:
    api, sink = FakeSearchApi(synthetic(START, 2, 3)), MemorySink()
    activities = exchange_activities(api, sink)

    def crashes(_: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError(f"Max retries exceeded with url: {URL}")

    activities[names.ACTIVITY_EXCHANGE_COLLECT] = crashes
    driver = ReplayDriver(orchestrator_handle(), activities, seed=1)
    driver.start(payload("exchange", 2, 2, max_attempts=1))
    result = driver.run()
    output = json.loads(result.output or "null")
    assert isinstance(output, dict), result.output
    assert output["failed"] == 2 and output["failures"][0]["kind"] == "activity_crashed"
    assert "Max retries exceeded" in output["failures"][0]["message"]
    assert "secretSIGNATURE" not in (result.output or "")


def test_a_crashing_finalize_keeps_the_collection_result_and_reports_the_manifest_error() -> None:
    api, sink = FakeSearchApi(synthetic(START, 2, 3)), MemorySink()
    activities = exchange_activities(api, sink)

    def finalize_crashes(_: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError(f"list failed: {URL}")

    activities[names.ACTIVITY_FINALIZE] = finalize_crashes
    driver = ReplayDriver(orchestrator_handle(), activities, seed=1)
    driver.start(payload("exchange", 2, 2))
    result = driver.run()
    output = json.loads(result.output or "null")
    assert isinstance(output, dict), result.output
    assert (output["completed"], output["status"], output["manifest"]) == (2, "CompletedWithFailures", None)
    assert output["manifestError"]["kind"] == "activity_crashed" and "list failed" in output["manifestError"]["message"]
    assert "secretSIGNATURE" not in (result.output or "")
