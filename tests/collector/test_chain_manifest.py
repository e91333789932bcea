"""The chain section of a retry link's manifest: the root's whole range over every link's summarised chunks.

Chunks and summaries are written by the real activity bodies (``bodies.exchange_collect``) into a MemorySink, and
the manifest by the real finalize body: only the audit API is a fake.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from activities import bodies
from http_api.retry_chain import retry_failed
from shared.models import ActivityResult, Chunk, JsonDict
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, FakeSearchApi, synthetic
from tests.collector.test_http_service import BODY, DAYS, LOOKBACK, FakeClient, finish, resolve, start

TENANT = "contoso.onmicrosoft.com"
PER_HOUR = 10


def hour(h: int, hours: int = 1) -> Chunk:
    return Chunk(T0 + timedelta(hours=h), T0 + timedelta(hours=h + hours))


def window(chunk: Chunk) -> JsonDict:
    return {"start": chunk.to_json()["start"], "end": chunk.to_json()["end"]}


def collect(api: FakeSearchApi, sink: MemorySink, collection: str, chunk: Chunk) -> None:
    """Every call of one chunk's lane until its summary is written, as the orchestrator drives them."""
    cursor = None
    for call in range(100):
        base = {"collectionId": collection, "tenantId": TENANT, "chunk": chunk.to_json(), "filters": {}, "attempt": 1}
        result = ActivityResult.from_json(bodies.exchange_collect(api, sink, {**base, "cursor": cursor, "call": call}))
        assert result.ok, result
        if "summary" in result.data:
            return
        cursor = result.data["cursor"]
    raise AssertionError("the chunk never finished")


def failure(chunk: Chunk) -> JsonDict:
    return {"chunk": chunk.to_json(), "kind": "transient", "message": "503", "attempts": 4}


def finalize(sink: MemorySink, collection: str, windows: list[Chunk], failed: list[Chunk], **extra: Any) -> JsonDict:
    payload = {
        "collectionId": collection,
        "tenantId": TENANT,
        "source": "exchange",
        "ranges": [window(c) for c in windows],
        "failures": [failure(c) for c in failed],
        "status": "CompletedWithFailures" if failed else "Completed",
        **extra,
    }
    result = ActivityResult.from_json(bodies.finalize(sink, payload))
    assert result.ok, result
    manifest: JsonDict = json.loads(sink.read_bytes(result.data["manifest"]) or b"")
    return manifest


def retry_request(root: str, generation: int, parent: str, root_range: Chunk, **extra: Any) -> JsonDict:
    """What ``retry_chain`` puts in a retry link's request (the orchestrator hands it to finalize)."""
    return {
        "collectionId": f"{root}-retry-{generation}",
        "retryOf": parent,
        "retryRoot": root,
        "retryGeneration": generation,
        "rootRanges": [window(root_range)],
        "expired": [],
        "chainExpired": [],
        **extra,
    }


def links_of(chain: JsonDict) -> list[tuple[str, str]]:
    return [(w["start"], w["link"]) for w in chain["windows"]]


def test_two_retries_that_fix_the_roots_two_failed_windows_prove_the_whole_range() -> None:
    api, sink = FakeSearchApi(synthetic(T0, 4, PER_HOUR)), MemorySink()
    whole = hour(0, 4)
    for h in (0, 2):
        collect(api, sink, "r", hour(h))
    root = finalize(sink, "r", [whole], [hour(1), hour(3)])
    assert "chain" not in root  # a root's own manifest is the proof of its range

    collect(api, sink, "r-retry-1", hour(1))  # hour 3 fails again
    request1 = retry_request("r", 1, "r", whole)
    first = finalize(sink, "r-retry-1", [hour(1), hour(3)], [hour(3)], parentCollectionId="r", request=request1)
    chain1 = first["chain"]
    assert chain1["links"] == ["r", "r-retry-1"] and chain1["root"] == "r"
    assert chain1["gaps"] == [] and [f["chunk"] for f in chain1["failures"]] == [hour(3).to_json()]
    assert chain1["totals"]["records"] == 3 * PER_HOUR and chain1["totals"]["chunks"] == 3

    collect(api, sink, "r-retry-2", hour(3))
    request2 = retry_request("r", 2, "r-retry-1", whole)
    second = finalize(sink, "r-retry-2", [hour(3)], [], parentCollectionId="r-retry-1", request=request2)
    chain = second["chain"]
    assert chain["links"] == ["r", "r-retry-1", "r-retry-2"]
    assert chain["ranges"] == [window(whole)]
    assert chain["gaps"] == [] and chain["failures"] == [] and chain["expired"] == [] and chain["superseded"] == []
    assert chain["totals"]["records"] == len({r["id"] for r in api.records}) == 4 * PER_HOUR
    assert chain["totals"]["chunks"] == 4
    assert chain["totals"]["bytes"] == sum(w["bytes"] for w in chain["windows"]) > 0
    starts = [window(hour(h))["start"] for h in range(4)]
    assert links_of(chain) == list(zip(starts, ["r", "r-retry-1", "r", "r-retry-2"], strict=True))
    # the link's own section still speaks only of its own windows
    assert second["totals"]["records"] == PER_HOUR


def test_the_newest_link_wins_over_an_older_links_late_chunk_inside_its_windows() -> None:
    """A terminated root's activities finished hour 1 (whole) and the first half of hour 2 after the retry was
    planned over hours 1-3; the retry collected hour 1 in halves and hour 2 whole. Each record counts once."""
    api, sink = FakeSearchApi(synthetic(T0, 4, PER_HOUR)), MemorySink()
    whole = hour(0, 4)
    collect(api, sink, "t", hour(0))
    collect(api, sink, "t", hour(1))  # late: the root was already terminated
    collect(api, sink, "t", hour(2).halves()[0])  # late, after a split of hour 2 in the root
    for chunk in (*hour(1).halves(), hour(2), hour(3)):
        collect(api, sink, "t-retry-1", chunk)
    request = retry_request("t", 1, "t", whole)
    manifest = finalize(sink, "t-retry-1", [hour(1), hour(2), hour(3)], [], parentCollectionId="t", request=request)
    chain = manifest["chain"]
    assert chain["totals"]["records"] == 4 * PER_HOUR and chain["totals"]["chunks"] == 5
    assert chain["gaps"] == []
    halves = [window(h)["start"] for h in hour(1).halves()]
    assert links_of(chain) == [
        (window(hour(0))["start"], "t"),
        (halves[0], "t-retry-1"),
        (halves[1], "t-retry-1"),
        (window(hour(2))["start"], "t-retry-1"),
        (window(hour(3))["start"], "t-retry-1"),
    ]
    prefix = f"{TENANT}/t/chunks/"
    assert chain["superseded"] == [
        prefix + "20241117T110000Z_20241117T120000Z.jsonl",
        prefix + "20241117T120000Z_20241117T123000Z.jsonl",
    ]


def test_a_window_no_link_covers_is_a_gap_and_expired_windows_are_listed_not_gaps() -> None:
    """Hour 0 expired before the first retry; hour 3 was lost (no chunk, no failure): only hour 3 is a gap."""
    api, sink = FakeSearchApi(synthetic(T0, 4, PER_HOUR)), MemorySink()
    whole = hour(0, 4)
    collect(api, sink, "e", hour(2))
    collect(api, sink, "e-retry-1", hour(1))
    expired = [window(hour(0))]
    request = retry_request("e", 1, "e", whole, expired=expired, chainExpired=expired)
    chain = finalize(sink, "e-retry-1", [hour(1)], [], parentCollectionId="e", request=request)["chain"]
    assert chain["expired"] == expired
    assert chain["gaps"] == [hour(3).to_json()]
    assert chain["totals"]["records"] == 2 * PER_HOUR


def test_a_link_started_before_the_chain_section_existed_says_why_it_has_none() -> None:
    api, sink = FakeSearchApi(synthetic(T0, 2, PER_HOUR)), MemorySink()
    collect(api, sink, "old", hour(0))
    collect(api, sink, "old-retry-1", hour(1))
    request = {"retryOf": "old", "retryRoot": "old", "retryGeneration": 1, "expired": []}  # no rootRanges
    manifest = finalize(sink, "old-retry-1", [hour(1)], [], parentCollectionId="old", request=request)
    assert manifest["chain"] is None
    assert "rootRanges" in manifest["chainReason"]
    assert manifest["totals"]["records"] == PER_HOUR  # its own section is unchanged


def test_an_older_chunk_in_a_window_the_newer_link_failed_still_counts_and_the_failure_stays_listed() -> None:
    """The root's late chunk of hour 1 is complete (its summary was written after it): the retry failed hour 1, so
    nothing newer overlaps it and it is the chain's chunk there, while the retry's failure is still reported."""
    api, sink = FakeSearchApi(synthetic(T0, 2, PER_HOUR)), MemorySink()
    whole = hour(0, 2)
    collect(api, sink, "l", hour(0))
    collect(api, sink, "l", hour(1))  # late, after the retry was planned over hour 1
    request = retry_request("l", 1, "l", whole)
    chain = finalize(sink, "l-retry-1", [hour(1)], [hour(1)], parentCollectionId="l", request=request)["chain"]
    assert links_of(chain) == [(window(hour(0))["start"], "l"), (window(hour(1))["start"], "l")]
    assert chain["totals"]["records"] == 2 * PER_HOUR and chain["superseded"] == [] and chain["gaps"] == []
    assert [f["chunk"] for f in chain["failures"]] == [hour(1).to_json()]


def test_a_roots_expired_window_stays_in_chain_expired_through_the_third_retry_and_is_never_a_gap() -> None:
    """Issue 18.9: the windows a link left out as expired travel from link to link (``chainExpired``): losing them at
    the third link (taking the previous link's own ``expired`` instead of the chain's) passed the suite and made the
    third link's manifest report the root's expired hours as a gap."""
    client, sink = FakeClient(), MemorySink()
    api = FakeSearchApi(synthetic(T0, 24, PER_HOUR))
    assert start(client, {**BODY, "collectionId": "aged"}).status == 202  # 6 windows of 4 h from T0
    for h in (8, 12, 16, 20):
        collect(api, sink, "aged", hour(h, 4))
    finish(client, "aged", {"status": "CompletedWithFailures", "failures": [failure(hour(0, 4)), failure(hour(4, 4))],
                            "remaining": {"cursor": 6}})  # fmt: skip
    later = T0 + timedelta(hours=2, days=DAYS)  # the retention cut-off is now T0 + 2 h: hours 0-2 expired
    expired = [window(hour(0, 2))]
    links: list[str] = []
    for generation in (1, 2, 3):
        answer = asyncio.run(retry_failed(client, "aged", later, sink, settings=LOOKBACK, resolve=resolve))
        assert answer.status == 202, answer.body
        link, request = answer.body["collectionId"], client.started[-1][2]["request"]
        links.append(link)
        assert request["chainExpired"] == expired, (generation, request)  # the root's, at every link
        assert request["expired"] == (expired if generation == 1 else [])  # each link's own
        if generation == 1:
            collect(api, sink, link, hour(2, 2))
        if generation < 3:  # hours 4-8 fail again until the third link collects them
            finish(client, link, {"status": "CompletedWithFailures", "failures": [failure(hour(4, 4))],
                                  "remaining": {"cursor": 1}})  # fmt: skip
    collect(api, sink, links[2], hour(4, 4))
    chain = finalize(sink, links[2], [hour(4, 4)], [], parentCollectionId=links[1], request=request)["chain"]
    assert chain["links"] == ["aged", *links]
    assert chain["expired"] == expired
    assert chain["gaps"] == []  # the expired hours are listed, never a gap
    assert chain["totals"]["records"] == 22 * PER_HOUR
