"""A follower as the e2e tests drive it over HTTP: its summary, waiting for a state of it, its history's size; and
the frontier a caught-up follower covers on a moved clock (the defaults' 90-minute delay, 4-hour windows)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import requests

from shared.models import iso
from tests.e2e.harness import Host

DELAY = 90  # minutes: COLLECTOR_FOLLOW_DELAY_MINUTES' default
INTERVAL = 240  # minutes: the tests' window


def frontier(start: datetime, now: datetime) -> datetime:
    """The end of the newest window that closed the usual delay ago (what the follower covers once it caught up):
    ``start`` itself while none has (the first hours after midnight, when a run begins then)."""
    edge = now - timedelta(minutes=DELAY)
    return start + timedelta(minutes=INTERVAL) * max(0, (edge - start) // timedelta(minutes=INTERVAL))


class Follower:
    def __init__(self, host: Host, follow_id: str) -> None:
        self.host, self.id = host, follow_id

    def summary(self) -> dict[str, Any]:
        response = requests.get(f"{self.host.base}/api/follows/{self.id}", timeout=30)
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def wait(self, done: Callable[[dict[str, Any]], bool], what: str, limit: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + limit
        summary: dict[str, Any] = {}
        while time.monotonic() < deadline:
            summary = self.summary()
            if done(summary):
                return summary
            time.sleep(0.05)
        raise AssertionError(f"follower never {what}: {json.dumps(summary)[:3000]}\n{self.host.log_tail()}")

    def idle_at(self, covered: datetime) -> dict[str, Any]:
        """Wait until its coverage reaches ``covered``, no window is left for search to backfill, and it waits for
        its next wake."""
        return self.wait(
            lambda s: (
                s["covered"]["end"] == iso(covered)
                and s["running"] is None
                and s["status"] != "catching up"
                and not s.get("backfill")
            ),
            f"caught up to {iso(covered)}",
        )

    def state_size(self) -> tuple[int, int]:
        """(history events of its current execution as the status API shows them, bytes of its input): what every
        replay of it reads."""
        status = self.host.status(self.id, history=True)
        response = requests.get(f"{self.host.base}/runtime/webhooks/durabletask/instances/{self.id}", timeout=30)
        return len(status["historyEvents"]), len(json.dumps(response.json()["input"]))
