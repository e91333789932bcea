"""The retry policy's rules, as the Python worker sends ``@app.retry`` settings and the host binds host.json ``retry``
(``durable_local.host.retries``; sources in ``docs/local-host.md``, "Retry policies")."""

from __future__ import annotations

import json
import random
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from durable_local.host import LocalHost
from durable_local.host.config import HostConfigError
from durable_local.host.retries import RetryPolicy, RetryPolicyError, policy_from_decorator, policy_from_host_json


def test_decorator_settings_are_read_as_the_python_worker_sends_them() -> None:
    fixed = policy_from_decorator({"strategy": "fixed_delay", "max_retry_count": "3", "delay_interval": "00:00:10"})
    assert fixed == RetryPolicy("FixedDelay", 3, delay_interval=timedelta(seconds=10))
    backoff = policy_from_decorator(
        {
            "strategy": "exponential_backoff",
            "max_retry_count": "-1",
            "minimum_interval": "00:00:04",
            "maximum_interval": "00:15:00",
            "delay_interval": "ignored",
        }
    )
    assert backoff == RetryPolicy(
        "ExponentialBackoff", -1, minimum_interval=timedelta(seconds=4), maximum_interval=timedelta(minutes=15)
    )


@pytest.mark.parametrize(
    ("settings", "rule"),
    [
        ({"strategy": "fixedDelay", "max_retry_count": "3", "delay_interval": "00:00:01"}, "fixed_delay or"),
        ({"strategy": "fixed_delay", "max_retry_count": "three", "delay_interval": "00:00:01"}, "max_retry_count"),
        ({"strategy": "fixed_delay", "max_retry_count": "-2", "delay_interval": "00:00:01"}, "-1 or more"),
        ({"strategy": "fixed_delay", "max_retry_count": "3"}, "delay_interval"),
        ({"strategy": "fixed_delay", "max_retry_count": "3", "delay_interval": "10s"}, "HH:MM:SS"),
        ({"strategy": "exponential_backoff", "max_retry_count": "3", "minimum_interval": "00:00:01"}, "maximum"),
        (
            {
                "strategy": "exponential_backoff",
                "max_retry_count": "3",
                "minimum_interval": "00:00:05",
                "maximum_interval": "00:00:01",
            },
            "must not be greater than the maximumInterval",
        ),
    ],
)
def test_decorator_settings_the_worker_or_host_refuses_are_refused(settings: dict[str, Any], rule: str) -> None:
    with pytest.raises(RetryPolicyError, match=re.escape(rule)):
        policy_from_decorator(settings)


def test_host_json_retry_is_bound_like_the_hosts_configuration() -> None:
    assert policy_from_host_json({"Strategy": "fixeddelay", "MAXRETRYCOUNT": "2", "delayInterval": "00:00:03"}) == (
        RetryPolicy("FixedDelay", 2, delay_interval=timedelta(seconds=3))
    )
    # No strategy: the enum's default, ExponentialBackoff, which needs both intervals.
    with pytest.raises(RetryPolicyError, match="minimumInterval"):
        policy_from_host_json({"maxRetryCount": 2, "delayInterval": "00:00:03"})
    with pytest.raises(RetryPolicyError, match="maxRetryCount"):
        policy_from_host_json({"strategy": "fixedDelay", "delayInterval": "00:00:03"})


def test_a_bad_host_json_retry_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text("import azure.functions as func\napp = func.FunctionApp()\n")
    (tmp_path / "host.json").write_text(json.dumps({"version": "2.0", "retry": {"strategy": "fixedDelay"}}))
    with pytest.raises(HostConfigError, match=r"retry.*maxRetryCount"):
        LocalHost(tmp_path, port=0, store="memory").start()


def test_exponential_backoff_delays_follow_the_webjobs_strategy() -> None:
    policy = RetryPolicy(
        "ExponentialBackoff", -1, minimum_interval=timedelta(seconds=4), maximum_interval=timedelta(seconds=60)
    )
    delays = policy.delays(random.Random(7))
    waits = [next(delays) for _ in range(8)]
    assert waits[0] == 4.0
    # minimum + (0.8..1.2) x 2^(n-1) x minimum while under the maximum, then the maximum for good
    assert 4 + 0.8 * 4 <= waits[1] <= 4 + 1.2 * 4
    assert 4 + 0.8 * 8 <= waits[2] <= 4 + 1.2 * 8
    assert 4 + 0.8 * 16 <= waits[3] <= 4 + 1.2 * 16
    assert waits[-3:] == [60.0, 60.0, 60.0]
    fixed = RetryPolicy("FixedDelay", 3, delay_interval=timedelta(seconds=2)).delays(random.Random(1))
    assert [next(fixed) for _ in range(3)] == [2.0, 2.0, 2.0]
