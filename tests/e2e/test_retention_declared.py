"""Issue 25, item 8: a tenant's retention may be shorter than 180 days (Microsoft365DSC's
``SCUnifiedAuditLogRetentionPolicy``: SevenDays, OneMonth, ThreeMonths). Declared with ``COLLECTOR_RETENTION_DAYS``,
the windows older than it are collected and flagged possibly partial, and the manifest says which retention it used
and whether ``HighCompleteness`` was asked for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.models import iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, body, serve


def test_a_30_day_retention_declared_flags_the_windows_older_than_30_days(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    emulator = make_emulator()
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(days=31)
    end = start + timedelta(days=2)
    with serve(emulator, tmp_path, {"COLLECTOR_RETENTION_DAYS": "30"}) as host:
        answer = host.post(body(end, start=start, interval=720, k=2, collectionId="short-retention"))
        assert answer.status_code == 202, answer.text
        assert any("30-day retention" in warning for warning in answer.json()["plan"]["warnings"])
        summary = host.wait("short-retention")
        ids = host.chunk_ids("short-retention")
        manifest = host.manifest("short-retention")
    assert summary["status"] == "Completed", summary
    assert sorted(ids) == sorted(emulator.ground_truth_ids(TENANT, start, end))  # collected whole all the same
    flagged = [c["chunk"]["start"] for c in manifest["chunks"] if c["possiblyPartial"]]
    # older than 30 days (in part) when the collection finished, a little after 30 days from the range's second day
    assert flagged == [iso(start + timedelta(hours=12 * i)) for i in range(3)]
    assert manifest["retention"]["guaranteedDays"] == 30
    assert manifest["options"] == {"highCompleteness": False}
