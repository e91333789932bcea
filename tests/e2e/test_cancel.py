"""Issue 18.4: ``POST /api/collections/{id}/cancel`` terminates a collection and gives its tenant-budget slots back at
once (a plain terminate held them for the whole lease, 600 s by default, while the next collection waited), writes a
manifest of what was collected before the cancel, and leaves the chain to ``retry-failed`` like a terminated link.
``/api/doctor`` takes a budget slot like any lane, so doctors run beside a collection draw no concurrency 429s.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import requests

from shared.models import parse_iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, serve
from tests.e2e.test_tenant_budget import (
    B,
    assert_exact,
    budget_env,
    budget_state,
    holders,
    hours,
    server_limit,
    start_collection,
    wait_state,
)

LEASE = 600.0  # the default: a terminated collection would hold its slots for ten minutes


def test_cancel_frees_the_slots_at_once_and_writes_what_was_collected(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    emulator = make_emulator(records_per_hour=30.0, configure=server_limit(10, 1.0, 0.0))
    with serve(emulator, tmp_path, budget_env(2, LEASE)) as host:
        start_collection(host, "mistake", hours(0, 12), k=2)
        wait_state(host, lambda s: sorted(holders(s.get("leases", []))) == ["mistake/0", "mistake/1"])
        # Let it finish a chunk or two, so the manifest has something to say; then hold its queries on the service.
        while (host.summary("mistake").get("progress") or {}).get("completed", 0) < 2:
            time.sleep(0.05)
        emulator.config.graph.completion_delay_seconds = 60.0
        start_collection(host, "patient", hours(20, 2), k=2)
        wait_state(host, lambda s: "patient/0" in holders(s.get("waiters", [])))
        emulator.config.graph.completion_delay_seconds = 0.2

        held = budget_state(host)["leases"]
        cancelled = host.post_path("/api/collections/mistake/cancel")
        assert cancelled.status_code == 200, cancelled.text
        granted = wait_state(host, lambda s: "patient/0" in holders(s.get("leases", [])), timeout=120)
        answer = cancelled.json()
        summary = host.summary("mistake")
        manifest = host.manifest("mistake")
        again = host.post_path("/api/collections/mistake/cancel")
        patient = host.wait("patient")
        retried = host.post_path("/api/collections/mistake/retry-failed")
        assert retried.status_code == 202, retried.text
        retry_id = retried.json()["collectionId"]
        finished = host.wait(retry_id)
        unknown = host.post_path("/api/collections/nobody/cancel")
        done = host.post_path("/api/collections/patient/cancel")
        ids = host.chunk_ids("mistake") + host.chunk_ids(retry_id)
        final = budget_state(host)
    # At once: the entity granted the slot while the cancelled collection's leases had most of their 600 s to run
    # (its own clock: how many seconds it took is the machine's load, not asserted).
    since = next(parse_iso(x["since"]) for x in granted["leases"] if x["holder"] == "patient/0")
    expiry = min(parse_iso(x["until"]) for x in held if x["holder"].startswith("mistake/"))
    print(f"cancel -> slot granted {expiry - since} before the cancelled collection's first lease would have run out")
    assert since < expiry - timedelta(seconds=LEASE / 2)
    assert not any(h.startswith("mistake/") for h in holders(granted["leases"]))
    assert answer["cancelled"] == ["mistake"] and answer["slotsReleased"] is True, answer
    assert summary["status"] == "Cancelled" and summary["runtimeStatus"] == "Terminated", summary
    assert summary["manifest"] and summary["manifest"].endswith("manifest.json")
    # The manifest says what was collected before the cancel; everything else is a gap, never a silent hole.
    assert manifest["status"] == "Cancelled" and manifest["reason"]["kind"] == "cancelled"
    assert manifest["totals"]["chunks"] >= 2 and manifest["gaps"], manifest["totals"]
    assert answer["manifest"]["totals"] == manifest["totals"]
    assert manifest["cancelled"]["at"] and isinstance(manifest["cancelled"]["inFlight"], list)
    # Cancelling again changes nothing; the chain goes on with retry-failed, over what has no chunk summary.
    assert again.status_code == 200 and again.json()["cancelled"] == [], again.text
    assert patient["status"] == "Completed" and finished["status"] == "Completed", (patient, finished)
    assert_exact(host, emulator, ["patient"], hours(20, 2))
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted(emulator.ground_truth_ids(TENANT, *hours(0, 12)))
    assert unknown.status_code == 404 and done.status_code == 409, (unknown.text, done.text)
    assert (final["leases"], final["waiters"]) == ([], []), final


def test_concurrent_doctors_beside_a_collection_take_budget_slots_and_draw_no_429(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    emulator = make_emulator(records_per_hour=30.0, configure=server_limit(B, 1.0, 0.5))
    with serve(emulator, tmp_path, budget_env()) as host:
        start_collection(host, "running", hours(0, 12))
        wait_state(host, lambda s: len(s.get("leases", [])) == B)

        def doctor(_: int) -> requests.Response:
            query = f"?tenantId={TENANT}&source=graph&timeoutSeconds=200"
            return requests.get(f"{host.base}/api/doctor{query}", timeout=240)

        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(doctor, range(6)))
        summary = host.wait("running")
        final = budget_state(host)
    key = (TENANT, "graph")
    assert emulator.stats.concurrency_429[key] == 0, emulator.stats.concurrency_429
    assert all(a.status_code == 200 for a in answers), [a.text[:300] for a in answers]
    bodies = [a.json() for a in answers]
    queries = [next(r for r in b["results"] if r["probe"] == "graph.query") for b in bodies]
    assert all(q["outcome"] == "ok" for q in queries), json.dumps(queries)[:2000]
    assert any(b["budget"]["graph"]["queued"] for b in bodies), [b["budget"] for b in bodies]  # it said it waited
    assert summary["status"] == "Completed"
    assert (final["leases"], final["waiters"], final["peak"]) == ([], [], B), final
