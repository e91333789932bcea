"""Reusing a collectionId, and finishing a collection that was terminated (review findings F1, F3, F4).

An analyst terminates a running collection with the ``terminatePostUri`` of its 202 (wrong range, wrong filter) and
then either finishes it with ``retry-failed`` or starts again. Finishing it retries only what has no chunk summary;
starting again under the same id is refused while the old output is there, whatever the Durable instance's state.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

from m365_emulator import EmulatorConfig
from shared.models import parse_iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, Host, body, serve


def _slow_queries(config: EmulatorConfig) -> None:
    config.graph.completion_delay_seconds = 1.0


def _terminate_after(host: Host, started: requests.Response, collection_id: str, chunks: int) -> dict[str, Any]:
    while host.summary(collection_id).get("progress", {}).get("completed", 0) < chunks:
        time.sleep(0.1)
    terminate = started.json()["terminatePostUri"].replace("{text}", "wrong-range")
    assert requests.post(terminate, timeout=30).status_code == 202
    return host.wait(collection_id)


def _summaries(host: Host, collection_id: str) -> list[dict[str, Any]]:
    folder = host.folder(collection_id) / "chunks"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.summary.json"))]


def _ids(host: Host, summary: dict[str, Any]) -> list[str]:
    return [json.loads(line)["id"] for line in (host.output / summary["blob"]).read_text().splitlines()]


def test_retry_failed_finishes_a_terminated_root_without_collecting_a_record_twice(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    emulator = make_emulator(configure=_slow_queries)
    end = START + timedelta(hours=8)
    with serve(emulator, tmp_path) as host:
        started = host.post(body(end, interval=60, k=2, collectionId="t1"))
        assert started.status_code == 202
        root = _terminate_after(host, started, "t1", 2)
        assert root["runtimeStatus"] == "Terminated", root

        response = host.post_path("/api/collections/t1/retry-failed")
        assert response.status_code == 202, response.text
        retry_id = response.json()["collectionId"]
        assert retry_id == "t1-retry-1" and response.json()["parentCollectionId"] == "t1"
        done = host.wait(retry_id)
        assert done["status"] == "Completed", done
        manifest = host.manifest(retry_id)
        covered = [(parse_iso(r["start"]), parse_iso(r["end"])) for r in manifest["ranges"]]
        assert 0 < len(covered) <= 8 - 2  # what the root had finished was not collected again

        # The chain's output: each link's summarised chunks, a later link winning over the windows it covers (an
        # activity of the terminated root may still have finished a chunk after the retry was planned).
        def later(chunk: dict[str, Any]) -> bool:
            start, stop = parse_iso(chunk["start"]), parse_iso(chunk["end"])
            return any(s <= start and stop <= e for s, e in covered)

        ids = [i for s in _summaries(host, "t1") if not later(s["chunk"]) for i in _ids(host, s)]
        ids += [i for s in _summaries(host, retry_id) for i in _ids(host, s)]
        assert manifest["totals"]["records"] == sum(s["records"] for s in _summaries(host, retry_id))
        # The retry's manifest states that union itself: the chain's kept chunks hold every record once.
        chain = manifest["chain"]
        chain_ids = [json.loads(line)["id"] for w in chain["windows"]
                     for line in (host.output / w["blob"]).read_text().splitlines()]  # fmt: skip
    truth = emulator.ground_truth_ids(TENANT, START, end)
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted(truth)
    assert chain["totals"]["records"] == len(truth) and chain["gaps"] == [] and chain["failures"] == []
    assert sorted(chain_ids) == sorted(truth) and chain["links"] == ["t1", retry_id]


def test_a_collection_id_cannot_be_reused_with_another_body_or_into_old_output(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    emulator = make_emulator(configure=_slow_queries)
    end = START + timedelta(hours=8)
    filtered = body(end, interval=60, k=2, collectionId="t2", filters={"operations": ["FileAccessed"]})
    with serve(emulator, tmp_path) as host:
        started = host.post(filtered)
        assert started.status_code == 202
        widened = host.post({**filtered, "filters": {}})  # "forgot" that the filter was wrong: same id, other body
        assert widened.status_code == 409, widened.text
        assert widened.json()["error"]["field"] == "filters.operations"
        assert widened.json()["error"]["rule"] == "conflict"
        assert host.post(filtered).json()["existing"] is True

        _terminate_after(host, started, "t2", 2)
        purge = started.json()["purgeHistoryDeleteUri"]
        assert requests.delete(purge, timeout=30).status_code == 200
        before = host.instances()
        again = host.post({**filtered, "filters": {}})
        assert again.status_code == 409, again.text
        error = again.json()["error"]
        assert (error["field"], error["rule"]) == ("collectionId", "output_exists")
        assert f"{TENANT}/t2/" in error["message"] and "another collectionId" in error["message"]
        assert host.instances() == before  # nothing started
