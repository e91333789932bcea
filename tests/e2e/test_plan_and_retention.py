"""The plan's size and the retention flag end to end (issue 17): the 202 answer says how many Graph queries the plan
submits, and a collection whose range is partly older than the tenant's guaranteed retention is collected whole,
its old windows flagged possibly partial in the summary and the manifest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.models import iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, body, serve


def test_a_range_straddling_the_180_day_retention_is_collected_and_its_old_windows_flagged(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    emulator = make_emulator()
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(days=181)
    end = start + timedelta(days=2)
    with serve(emulator, tmp_path, {"COLLECTOR_RETENTION_DAYS": "180"}) as host:
        answer = host.post(body(end, start=start, interval=720, k=2, collectionId="old"))
        assert answer.status_code == 202, answer.text
        plan = answer.json()["plan"]
        summary = host.wait("old")
        ids = host.chunk_ids("old")
        manifest = host.manifest("old")
    assert plan["graphQueries"] == 4 and plan["intervalDefault"] is False
    assert any("180-day retention" in warning for warning in plan["warnings"]), plan
    assert summary["status"] == "Completed", summary
    assert sorted(ids) == sorted(emulator.ground_truth_ids(TENANT, start, end))  # collected whole all the same
    flagged = [c["chunk"]["start"] for c in manifest["chunks"] if c["possiblyPartial"]]
    assert flagged == [iso(start + timedelta(hours=12 * i)) for i in range(3)]  # those older than 180 days at the end
    assert manifest["totals"]["possiblyPartialChunks"] == 3
    assert manifest["retention"]["guaranteedDays"] == 180 and "E5" in manifest["retention"]["reason"]
    assert summary["retention"]["possiblyPartial"][0]["start"] == iso(start)
