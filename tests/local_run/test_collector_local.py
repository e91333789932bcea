"""The README's main job (``python -m collector_local``, what ``scripts/run-local.sh`` runs after set-up) works:
the seed scenario's shape on the embedded default, output equal to the emulator's ground truth."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "collector_local", "--output", str(tmp_path / "out"), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_main_job_collects_the_seed_scenario_exactly(tmp_path: Path) -> None:
    # --open hands the live page's URL to the default browser: $BROWSER, here a script that writes it down
    opened = tmp_path / "opened.txt"
    recorder = tmp_path / "browser.py"
    recorder.write_text(f"import sys, pathlib\npathlib.Path({str(opened)!r}).write_text(sys.argv[1])\n")
    done = _run(
        tmp_path,
        *("--days", "1", "--interval", "240", "--concurrency", "2", "--records-per-hour", "40", "--open"),
        env_extra={"BROWSER": f"{sys.executable} {recorder} %s"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exact match" in done.stdout
    assert "6 chunks" in done.stdout
    (page,) = re.findall(r"^Live page  (\S+)$", done.stdout, re.MULTILINE)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/api/collections/local-[0-9a-f]{12}/view", page), page
    assert opened.read_text() == page
    manifests = list((tmp_path / "out").rglob("manifest.json"))
    assert len(manifests) == 1
    manifest = json.loads(manifests[0].read_text())
    chunk_files = [p for p in manifests[0].parent.glob("chunks/*.jsonl") if not p.name.endswith(".quarantine.jsonl")]
    assert len(chunk_files) == 6
    assert manifest["totals"]["records"] == sum(
        1 for path in chunk_files for line in path.read_text().splitlines() if line.strip()
    )
    # the last day ends now: all of it may still gain late records on a real tenant, and the run says so
    assert manifest["totals"]["provisionalChunks"] == 6
    assert re.search(r"^Late       .* may still gain records", done.stdout, re.MULTILINE), done.stdout


def test_main_job_reports_a_rejected_request(tmp_path: Path) -> None:
    # an interval below the minimum is refused by the HTTP API: the run says why and exits non-zero
    done = _run(tmp_path, "--days", "1", "--interval", "0")
    assert done.returncode == 1
    assert "HTTP 400" in done.stdout and "intervalMinutes" in done.stdout
    assert not list((tmp_path / "out").rglob("*.jsonl"))
