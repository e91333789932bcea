"""The live page says when a collection waits for the tenant's daily Graph quota (issue 25 item 6), in headless
Chromium over the collector on the local host + emulator: the status line names the wait and until when."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from m365_emulator import EmulatorConfig
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, body, serve

WAIT = "waiting for the tenant's daily Graph quota until"


def test_the_status_line_says_the_collection_waits_for_the_daily_graph_quota(
    make_emulator: MakeEmulator, tmp_path: Path, page: Any
) -> None:
    def configure(config: EmulatorConfig) -> None:
        config.graph.daily_submission_quota = 3

    emulator = make_emulator(configure=configure)
    settings = {"COLLECTOR_GRAPH_DAILY_QUERIES": "3", "COLLECTOR_GRAPH_DAILY_RESERVE": "1"}  # 2 a day for it
    with serve(emulator, tmp_path, settings) as host:
        started = host.post(body(START + timedelta(hours=4), interval=60, k=2, collectionId="quota-wait"))
        assert started.status_code == 202, started.text
        page.goto(f"{host.base}/api/collections/quota-wait/view?refresh=0.25")
        deadline = time.monotonic() + 90
        while WAIT not in page.inner_text("#f-status") and time.monotonic() < deadline:
            time.sleep(0.2)
        status = page.inner_text("#f-status")
        summary = host.summary("quota-wait")
        page.goto("about:blank")  # it refreshes while the collection waits: stop before the host does
    assert status.startswith("Running") and WAIT in status, status
    assert summary["budget"]["state"].startswith(WAIT) and summary["progress"]["completed"] == 2
    assert emulator.graph.quota.used(summary["collection"]["tenantId"]) == 2
