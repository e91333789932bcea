"""The synthetic tenant: determinism, counts, bursts, retention, record realism (pure logic, no server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from m365_emulator import BurstWindow, TenantSpec
from m365_emulator.stream import RecordFilter, count_matching, iter_matching
from m365_emulator.synth import hour_count, hour_records
from tests.emulator.helpers import T0, TENANT

START, END = T0.timestamp(), (T0 + timedelta(days=2)).timestamp()


def ids(spec: TenantSpec, start: float = START, end: float = END, flt: RecordFilter | None = None) -> list[str]:
    return [r.id for r, _ in iter_matching(spec, start, end, flt or RecordFilter())]


def test_same_seed_same_records_other_seed_other_records() -> None:
    a = TenantSpec(TENANT, seed=5, records_per_hour=80)
    again = TenantSpec(TENANT, seed=5, records_per_hour=80)
    other = TenantSpec(TENANT, seed=6, records_per_hour=80)
    assert ids(a) == ids(again)
    assert not set(ids(a)) & set(ids(other))


def test_ids_unique_and_order_is_by_time() -> None:
    spec = TenantSpec(TENANT, seed=2, records_per_hour=300)
    records = [r for r, _ in iter_matching(spec, START, END, RecordFilter())]
    assert len({r.id for r in records}) == len(records) > 10_000
    assert [r.epoch for r in records] == sorted(r.epoch for r in records)


def test_fast_count_equals_walking_the_stream_for_odd_windows() -> None:
    spec = TenantSpec(TENANT, seed=3, records_per_hour=50, retention_start=T0 + timedelta(minutes=90))
    for start, end in [(START + 61, START + 7 * 3600 + 5), (START - 7200, START + 3600), (START, END)]:
        assert count_matching(spec, start, end, RecordFilter()) == len(ids(spec, start, end))


def test_half_open_windows_partition_the_stream() -> None:
    spec = TenantSpec(TENANT, seed=4, records_per_hour=200)
    middle = START + 5 * 3600 + 1234
    assert ids(spec, START, middle) + ids(spec, middle, END) == ids(spec)


def test_hourly_volume_tracks_the_rate_and_bursts_multiply() -> None:
    burst = BurstWindow(T0 + timedelta(hours=10), T0 + timedelta(hours=20), 5.0)
    spec = TenantSpec(TENANT, seed=9, records_per_hour=400, bursts=(burst,))
    hour0 = int(START // 3600)
    quiet = [hour_count(spec, hour0 + h) for h in range(10)]
    loud = [hour_count(spec, hour0 + h) for h in range(10, 20)]
    assert 300 < sum(quiet) / 10 < 500
    assert 4 * sum(quiet) < sum(loud) < 6 * sum(quiet)
    small = TenantSpec(TENANT, seed=9, records_per_hour=2.5)
    counts = [hour_count(small, hour0 + h) for h in range(200)]
    assert 1.5 < sum(counts) / 200 < 3.5 and min(counts) == 0  # Poisson-like for small rates


def test_retention_start_cuts_older_records() -> None:
    cut = T0 + timedelta(hours=3, minutes=30)
    spec = TenantSpec(TENANT, seed=1, records_per_hour=100, retention_start=cut)
    records = [r for r, _ in iter_matching(spec, START, END, RecordFilter())]
    assert records and min(r.epoch for r in records) >= cut.timestamp()


def test_records_carry_realistic_fields_per_workload() -> None:
    spec = TenantSpec(TENANT, domain="fabrikam.onmicrosoft.com", seed=11, records_per_hour=500)
    records = [r for h in range(24) for r in hour_records(spec, int(START // 3600) + h)]
    operations = {r.template.operation for r in records}
    assert operations >= {"MailItemsAccessed", "Send", "New-InboxRule", "FileAccessed", "FileDownloaded",
                          "FileModified", "UserLoggedIn", "UserLoginFailed", "MessageSent", "MemberAdded"}  # fmt: skip
    services = {r.service for r in records}
    assert services == {"Exchange", "SharePoint", "OneDrive", "AzureActiveDirectory", "MicrosoftTeams"}
    for record in records[:500]:
        graph = record.graph_record()
        data = graph["auditData"]
        assert data["Id"] == graph["id"] and data["Operation"] == graph["operation"]
        assert graph["createdDateTime"].startswith(data["CreationTime"])
        assert graph["userPrincipalName"].endswith("@fabrikam.onmicrosoft.com")
        assert datetime.fromisoformat(graph["createdDateTime"]).tzinfo == UTC
        json.loads(record.audit_text())
        if graph["service"] in ("SharePoint", "OneDrive"):
            assert graph["objectId"].startswith("https://fabrikam") and graph["objectId"] == data["ObjectId"]
