"""A collection of the feed (the Office 365 Management Activity API) over the last days, as deployed (the hosted
profile: the tenant budget on, its key set), against the emulator's feed on a moved clock.

The doctor starts the tenant's subscriptions three days before the range (the feed lists content only from a
subscription's start on), the clock moves on, and a feed collection reads the last two days. The emulator is the least
convenient feed it knows how to be, but for a blob every 30 minutes instead of 5 (so the test fetches a few hundred
blobs, not thousands): records published 60-90 minutes late (a tenth up to a day), 5 % of them published again in a
later blob, blobs shuffled, listings in pages of 20 behind ``NextPageUri``, 2,000 requests a minute. Each chunk holds
exactly the records of its window the feed had published by the end of the publication window it read (its evidence
names it), each once; together they hold every record published before the collection started, and none the feed had
not published when it ended.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import requests

from durable_local.clock import OffsetFileClock
from m365_emulator import EmulatorConfig
from shared.models import iso, parse_iso
from shared.sources.feed.calls import CONTENT_TYPES, LISTING_MARGIN
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, Host, serve


def _ids(host: Host, blob: str) -> list[str]:
    import json

    path = host.output / blob
    return [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []


def test_a_feed_collection_holds_exactly_what_the_feed_published_by_each_read(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    clock = OffsetFileClock(tmp_path / "clock")

    def fewer_blobs(config: EmulatorConfig) -> None:
        config.feed.blob_interval_seconds = 1800  # friendlier: 48 blobs a day per content type, not 288

    emulator = make_emulator(records_per_hour=50.0, configure=fewer_blobs, clock=clock.now)
    with serve(emulator, tmp_path, clock_file=clock.path) as host:
        doctor = requests.get(
            f"{host.base}/api/doctor", params={"tenantId": TENANT, "source": "feed", "timeoutSeconds": "60"}, timeout=90
        )
        assert doctor.status_code == 200, doctor.text
        probes = {r["probe"]: r for r in doctor.json()["results"]}
        assert probes["feed.subscriptions"]["outcome"] == "ok", probes
        assert "started now" in probes["feed.subscriptions"]["detail"]
        assert all(emulator.feed.subscription(TENANT, t) is not None for t in CONTENT_TYPES)

        clock.advance(timedelta(days=3))
        now = clock.now()
        start = (now - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
        end = (now - timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
        request = {"tenantId": TENANT, "startDate": iso(start), "endDate": iso(end), "source": "feed"}
        request.update(intervalMinutes=720, maxConcurrency=3, collectionId="feed-two-days")
        started = clock.now()
        answer = host.post(request)
        assert answer.status_code == 202, answer.text
        plan = answer.json()["plan"]
        assert plan["feedContentTypes"] == list(CONTENT_TYPES) and plan["graphQueries"] is None
        summary = host.wait("feed-two-days", limit_seconds=600)
        finished = clock.now()
    assert summary["status"] == "Completed", summary
    assert summary["feed"]["calls"] >= 4 * len(CONTENT_TYPES) and summary["feed"]["repeats"] > 0
    manifest = host.manifest("feed-two-days")
    assert manifest["source"] == "feed" and manifest["gaps"] == [] and manifest["totals"]["incompleteChunks"] == 0
    assert "publishedUntil" in manifest["feed"]["proves"] and "late" in manifest["feed"]["cannotProve"]
    assert manifest["queries"] is None and manifest["exchange"] is None

    everything: list[str] = []
    for chunk in manifest["chunks"]:
        evidence = chunk["evidence"]
        assert [e["contentType"] for e in evidence] == list(CONTENT_TYPES) and all(e["complete"] for e in evidence)
        until = parse_iso(evidence[0]["published"]["end"])
        window = (parse_iso(chunk["chunk"]["start"]), parse_iso(chunk["chunk"]["end"]))
        expected = emulator.feed.ground_truth_ids(TENANT, *window, published_before=until)
        ids = _ids(host, chunk["blob"])
        assert sorted(ids) == sorted(expected), f"{chunk['chunk']}: {len(ids)} of {len(expected)}"
        everything += ids
    assert len(everything) == len(set(everything)) and everything
    published_first = set(emulator.feed.ground_truth_ids(TENANT, start, end, published_before=started - LISTING_MARGIN))
    published_last = set(emulator.feed.ground_truth_ids(TENANT, start, end, published_before=finished))
    assert published_first <= set(everything) <= published_last
    stats = emulator.feed.stats
    assert stats.list_pages[TENANT] > 0 and stats.without_publisher[TENANT] == 0
