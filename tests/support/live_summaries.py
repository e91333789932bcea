"""Synthetic summaries of a large running collection, for measuring the live page's refresh in a browser.

Each summary is what ``GET /api/collections/{id}`` answers (``http_api.service.collection_summary``), with the grid
computed by the real ``http_api.grid_cells.encode`` from a published snapshot: the cursor moves on every step, K
lanes run behind it, every 97th cell failed, every 211th is incomplete and every 131st is split with one half still
running or waiting.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from http_api.grid_cells import Cells, encode
from shared.models import iso
from shared.timeline.planning import ChunkPlan
from shared.window.machine import CollectionSpec
from shared.window.state import RunOptions

ORIGIN = datetime(2024, 6, 1, tzinfo=UTC)
MINUTE = 60


def spec(cells: int) -> CollectionSpec:
    plan = ChunkPlan(ORIGIN, ORIGIN + timedelta(minutes=cells), timedelta(minutes=1))
    return CollectionSpec("synthetic", "contoso.onmicrosoft.com", "graph", {}, RunOptions(max_concurrency=10), plan)


def published(cells: int, cursor: int, k: int = 10) -> dict[str, Any]:
    lanes = [[i * MINUTE, (i + 1) * MINUTE, "export", 1] for i in range(max(0, cursor - k), cursor)]
    started = max(0, cursor - k)
    failed = [[i * MINUTE, (i + 1) * MINUTE] for i in range(0, started, 97)]
    incomplete = [[i * MINUTE, (i + 1) * MINUTE] for i in range(5, started, 211)]
    split = [i for i in range(7, started, 131) if i not in range(0, started, 97)]
    lanes += [[i * MINUTE + 30, (i + 1) * MINUTE, "poll", 2] for i in split[-3:]]
    requeued = [[i * MINUTE + 30, (i + 1) * MINUTE] for i in split[:-3][-40:]]
    return {
        "origin": iso(ORIGIN),
        "cursor": cursor,
        "lanes": lanes,
        "requeued": requeued,
        "failed": failed,
        "incomplete": incomplete,
        "recent": [],
    }


def summary(cells: int, cursor: int, *, ended: bool = False) -> dict[str, Any]:
    snapshot = published(cells, cursor if not ended else cells, k=0 if ended else 10)
    if ended:
        snapshot["requeued"] = []
    grid = encode(Cells.of(spec(cells)), json.loads(json.dumps(snapshot)))
    failed = grid["counts"].get("f", 0)
    done = grid["counts"].get("d", 0) + grid["counts"].get("i", 0)
    status = "CompletedWithFailures" if ended else "Running"
    failures = [
        {
            "window": f"{iso(ORIGIN + timedelta(seconds=s))}/{iso(ORIGIN + timedelta(seconds=e))}",
            "kind": "query_failed",
            "reason": "the audit query ended failed",
            "attempts": 4,
        }
        for s, e in snapshot["failed"][-5:]
    ]
    return {
        "collectionId": "synthetic",
        "runtimeStatus": "Completed" if ended else "Running",
        "status": status,
        "progress": {
            "total": cells,
            "completed": done,
            "failed": failed,
            "inFlight": len(snapshot["lanes"]),
            "percent": round(100.0 * (done + failed) / cells, 1),
            "splits": 0,
            "incomplete": grid["counts"].get("i", 0),
            "execution": 1 + cursor // 50,
        },
        "records": done * 37,
        "windowsInFlight": [],
        "failures": failures,
        "reason": None,
        "stopping": None,
        "manifest": None,
        "outputPrefix": "contoso.onmicrosoft.com/synthetic/",
        "parentCollectionId": None,
        "collection": {
            "tenantId": "contoso.onmicrosoft.com",
            "source": "graph",
            "maxConcurrency": 10,
            "startedAt": iso(ORIGIN + timedelta(days=30)),
            "filters": {},
            "startDate": iso(ORIGIN),
            "endDate": iso(ORIGIN + timedelta(minutes=cells)),
            "intervalMinutes": 1.0,
        },
        "grid": grid,
        "createdTime": iso(ORIGIN + timedelta(days=30)),
        "lastUpdatedTime": iso(ORIGIN + timedelta(days=30, hours=1)),
    }


def series(cells: int, steps: int) -> list[str]:
    """``steps`` summaries (JSON text) of the collection moving from 0 to every cell, the last one ended."""
    texts = [json.dumps(summary(cells, (cells * step) // steps)) for step in range(1, steps)]
    return [*texts, json.dumps(summary(cells, cells, ended=True))]


def measure_in_browser(context: Any, cells: int, steps: int, refresh: float = 0.25) -> dict[str, float]:
    """Serve the real collection page and ``steps`` synthetic summaries to Chromium (intercepted requests on a
    made-up origin: no server involved), let the page refresh through all of them, and read its script time."""
    from http_api import view

    texts = series(cells, steps)
    served = {"count": 0}
    page_body = view.page("collection")

    def serve_page(route: Any) -> None:
        route.fulfill(status=200, body=page_body.body, headers={**page_body.headers, "Content-Type": "text/html"})

    def serve_summary(route: Any) -> None:
        text = texts[min(served["count"], len(texts) - 1)]
        served["count"] += 1
        route.fulfill(status=200, body=text, headers={"Content-Type": "application/json"})

    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.route("http://live.test/api/collections/synthetic/view*", serve_page)
        page.route("http://live.test/api/collections/synthetic", serve_summary)
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(f"http://live.test/api/collections/synthetic/view?refresh={refresh}")
        page.wait_for_selector("body[data-state=ended]", timeout=120_000)
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        stats = page.evaluate("window.liveStats")
        drawn = page.eval_on_selector("#grid", "c => [Number(c.dataset.cells), c.dataset.states]")
    finally:
        page.close()
    if errors:
        raise AssertionError(f"the page raised: {errors}")
    renders = int(stats["renders"])
    return {
        "cells": drawn[0],
        "states_match": float(drawn[1] == json.loads(texts[-1])["grid"]["states"]),
        "renders": renders,
        "first_ms": stats["firstMs"],
        "refresh_mean_ms": (stats["totalMs"] - stats["firstMs"]) / max(1, renders - 1),
        "refresh_max_ms": stats["maxMs"],
        "cdp_script_ms": 1000 * metrics.get("ScriptDuration", 0.0),
        "cdp_task_ms": 1000 * metrics.get("TaskDuration", 0.0),
        "bytes_per_summary": len(texts[len(texts) // 2]),
    }
