"""The live collection page in real headless Chromium, over the collector on the local host + emulator.

What a person watching sees: one grid cell per planned chunk, cells turning done as chunks finish (read off the
canvas's pixels, not only its data), a failure with its reason, shown as text even when the service's text holds
markup, the retry button starting a retry collection, and the collections list. The 10,000-chunk refresh is
measured and printed, never asserted as a time.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

from m365_emulator import EmulatorConfig
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, body, serve
from tests.support.browser import CELL_PIXEL_JS, COLOURS
from tests.support.live_summaries import measure_in_browser

MARKUP = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def expand(states: str) -> str:
    return "".join(letter * int(run) for letter, run in re.findall(r"([a-z])(\d+)", states))


def grid_states(page: Any) -> str:
    return str(page.eval_on_selector("#grid", "c => c.dataset.states || ''"))


def test_grid_follows_a_running_collection_cell_by_cell(make_emulator: MakeEmulator, tmp_path: Path, page: Any) -> None:
    hour = timedelta(hours=1)

    def configure(config: EmulatorConfig) -> None:
        config.graph.completion_delay_seconds = 0.05
        config.graph.completion_jitter_seconds = 0.15  # chunks finish out of order
        config.graph.record_count_limit = 150  # the burst hour is over the cap: it splits inside its cell
        config.faults.fail_query_windows = ((START + 20 * hour, START + 21 * hour),)
        config.tenants[0] = replace(config.tenants[0], bursts=((START + 27 * hour, START + 28 * hour, 16.0),))

    emulator = make_emulator(records_per_hour=40.0, configure=configure)
    with serve(emulator, tmp_path) as host:
        started = host.post(body(START + 36 * hour, interval=60, k=4, collectionId="watched"))
        assert started.status_code == 202, started.text
        planned = started.json()["chunks"]
        page.goto(f"{host.base}/api/collections/watched/view?refresh=0.25")
        seen: list[str] = []
        running_pixel = None
        screenshot, shown = tmp_path / "live-page.png", 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            cells = expand(grid_states(page))
            if cells and (not seen or cells != seen[-1]):
                seen.append(cells)
                if running_pixel is None and "r" in cells:
                    running_pixel = page.evaluate(CELL_PIXEL_JS, cells.index("r")), cells
                variety = len(set(cells) & set("rsf")) if "p" in cells else 0
                if variety > shown:  # a running collection showing as many kinds of cell as it can
                    page.screenshot(path=str(screenshot), full_page=True)
                    shown = variety
            if page.eval_on_selector("body", "b => b.dataset.state") == "ended":
                break
            time.sleep(0.1)
        final = expand(grid_states(page))
        done_pixel = page.evaluate(CELL_PIXEL_JS, 0)
        failed_pixel = page.evaluate(CELL_PIXEL_JS, 20)
        summary = host.summary("watched")
        late_text = page.inner_text("#o-latency")
    assert page.eval_on_selector("#grid", "c => Number(c.dataset.cells)") == planned == 36
    # the page says which windows may still gain late records (the summary's latency), or that none may
    provisional = summary["latency"]["provisional"]
    assert ("collect again after" in late_text) == bool(provisional) and ("none:" in late_text) != bool(provisional)
    assert len(final) == planned and final[20] == "f" and final.replace("f", "") == "d" * (planned - 1), final
    assert summary["status"] == "CompletedWithFailures"
    # cells turned done one refresh after another, and a done cell never went back
    assert len(seen) >= 4 and seen[0].count("d") < planned // 2, seen[:3]
    for before, after in itertools.pairwise(seen):
        assert all(b != "d" or a == "d" for b, a in zip(before, after)), (before, after)
    # the canvas shows it: a running cell was blue while it ran, a done one green, the failed one vermillion
    assert running_pixel is not None and running_pixel[0] == list(COLOURS["r"]), running_pixel
    assert done_pixel == list(COLOURS["d"]) and failed_pixel == list(COLOURS["f"])
    assert shown > 0
    target = os.environ.get("LIVE_PAGE_SCREENSHOT")  # set once to refresh docs/images/live-page.png
    if target:
        shutil.copyfile(screenshot, target)


def test_failure_reason_is_text_and_retry_starts_a_retry_collection(
    make_emulator: MakeEmulator, tmp_path: Path, page: Any
) -> None:
    bad = (START + timedelta(hours=2), START + timedelta(hours=3))

    def configure(config: EmulatorConfig) -> None:
        config.faults.fail_query_windows = (bad,)
        config.faults.fail_query_message = MARKUP

    emulator = make_emulator(configure=configure)
    with serve(emulator, tmp_path) as host:
        started = host.post(body(START + timedelta(hours=6), interval=60, k=2, source="exchange", collectionId="xss"))
        assert started.status_code == 202, started.text
        page.goto(f"{host.base}/api/collections/xss/view?refresh=0.25")
        page.wait_for_selector("body[data-state=ended]", timeout=60_000)
        assert expand(grid_states(page)) == "ddfddd"
        reason = page.inner_text("#failures tbody td.reason")
        assert MARKUP in reason  # the service's markup, shown as the text it is
        assert page.evaluate("window.__pwned") is None  # and nothing in it ran
        assert page.locator("#failures img, #failures script").count() == 0
        assert "retry" in page.inner_text("#failures tbody").lower()  # the fix for the failure's kind
        # the failed cell tells its story on hover and on keyboard focus
        size = int(page.eval_on_selector("#grid", "c => Number(c.dataset.cellSize)"))
        page.hover("#grid", position={"x": 2 * size + size / 2, "y": size / 2})
        assert MARKUP in page.inner_text("#tip")
        page.focus("#grid")
        page.keyboard.press("Home")
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        info = page.inner_text("#cell-info")
        assert "Chunk 3 of 6" in info and "failed" in info and MARKUP in info
        assert page.evaluate("window.__pwned") is None
        # retry: asks first, then starts a collection of the failed window and links its page
        emulator.faults.fail_query_windows = ()
        asked: list[str] = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        page.click("#retry")
        link = page.wait_for_selector("#retry-link", timeout=30_000)
        assert asked and "1 failed chunk" in asked[0]
        retry_id = link.inner_text()
        assert retry_id.startswith("xss-retry-")
        page.click("#retry-link")
        page.wait_for_url(f"{host.base}/api/collections/{retry_id}/view")
        page.wait_for_selector("body[data-state=ended]", timeout=60_000)
        assert expand(grid_states(page)) == "d"
        assert page.inner_text("#f-parent") == "xss"
        retried = host.summary(retry_id)
        assert retried["status"] == "Completed" and retried["parentCollectionId"] == "xss"
        # the retry's page says what the whole chain now holds (its manifest's chain section)
        chain_line = page.inner_text("#o-chain")
        assert chain_line.startswith("root xss, 2 links: ") and "0 gaps, 0 still failed" in chain_line, chain_line
        assert f"{retried['chain']['totals']['records']:,} records" in chain_line
        # the list page: both collections, newest first, each linking its live page
        page.goto(f"{host.base}/api/collections/view")
        page.wait_for_selector("#list tbody a")
        listed = page.locator("#list tbody td:first-child a").all_inner_texts()
        assert listed == [retry_id, "xss"]
        too_many = requests.get(f"{host.base}/api/collections", params={"top": "0"}, timeout=30)
        assert too_many.status_code == 400 and too_many.json()["error"]["field"] == "top"


def test_the_page_passes_its_function_key_on_to_its_api_calls(
    make_emulator: MakeEmulator, tmp_path: Path, page: Any
) -> None:
    emulator = make_emulator()
    with serve(emulator, tmp_path, extra_args=("--require-keys",)) as host:
        key = _function_key(host.log)
        assert host.post(body(START + timedelta(hours=3), interval=60, k=3)).status_code == 401
        started = requests.post(
            f"{host.base}/api/collections",
            json=body(START + timedelta(hours=3), interval=60, k=3, collectionId="keyed"),
            headers={"x-functions-key": key},
            timeout=30,
        )
        assert started.status_code == 202, started.text
        assert requests.get(f"{host.base}/api/collections/keyed/view", timeout=30).status_code == 401
        page.goto(f"{host.base}/api/collections/keyed/view?code={key}&refresh=0.25")
        page.wait_for_selector("body[data-state=ended]", timeout=60_000)
        assert expand(grid_states(page)) == "ddd" and page.inner_text("#conn") == ""
        assert page.get_attribute("#all-link", "href") == f"/api/collections/view?code={key}"


def _function_key(log: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"^Function key \(default\): (\S+)$", log.read_text(errors="replace"), re.MULTILINE)
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise AssertionError("the host printed no function key")


def test_ten_thousand_chunks_refresh_in_the_browser(chromium_context: Any) -> None:
    figures = measure_in_browser(chromium_context, cells=10_000, steps=12)
    assert figures["cells"] == 10_000 and figures["states_match"] == 1.0 and figures["renders"] >= 12
    print(
        f"\n10,000-chunk page: first render {figures['first_ms']:.1f} ms of script, then "
        f"{figures['refresh_mean_ms']:.1f} ms per refresh (max {figures['refresh_max_ms']:.1f} ms) over "
        f"{figures['renders']} refreshes; summary {figures['bytes_per_summary']:,} bytes"
    )
