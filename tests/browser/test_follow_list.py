"""The collections list page in headless Chromium lists followers beside collections: what each covers, how far it
is behind, what may still gain late records, and its last error, as text; a pass's live page offers no retry (the
follower retries its windows itself) and names its follower."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

from durable_local.clock import OffsetFileClock
from shared.models import iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, serve


def test_the_list_page_shows_followers(make_emulator: MakeEmulator, tmp_path: Path, page: Any) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator = make_emulator(records_per_hour=20.0, clock=clock.now)
    start = clock.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=4)
    with serve(emulator, tmp_path, clock_file=clock.path) as host:
        body = {"tenantId": TENANT, "startDate": iso(start), "intervalMinutes": 60}
        started = requests.post(f"{host.base}/api/follows", json=body, timeout=30)
        assert started.status_code == 202, started.text
        follow = started.json()["followId"]
        page.goto(f"{host.base}/api/collections/view")
        page.wait_for_function(
            "() => [...document.querySelectorAll('#follows tbody td')].some(td => td.textContent === 'following')",
            timeout=60_000,
        )
        cells = page.locator("#follows tbody tr").first.locator("td").all_inner_texts()
        assert cells[0].startswith(follow) and cells[2] == TENANT and cells[3] == "graph"
        assert cells[4].startswith(start.strftime("%Y-%m-%d %H:%M:%S"))
        assert "windows, final after" in cells[6] and cells[7] == "0" and cells[8] == "\u2014"
        assert page.inner_text("#list tbody") == "No collections yet.", "its passes are under it, not listed"

        passes = sorted(i["instanceId"] for i in host.instances() if i["instanceId"].startswith(f"{follow}-"))
        page.goto(f"{host.base}/api/collections/{passes[0]}/view")
        page.wait_for_selector("#follow-link", timeout=60_000)
        assert page.inner_text("#follow-link") == follow
        assert not page.is_visible("#retry"), "no retry that would collect the follower's windows a second time"
        assert "retries its failed windows itself" in page.inner_text("#retry-result")
