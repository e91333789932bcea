"""The bench scripts keep working: each runs at a tiny size and prints its side-by-side figures.

Figures are never asserted here (they are measurements, printed by the scripts); only that each script runs to
the end and reports the comparison it exists for.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CASES = [
    (["storage_ops.py", "--messages", "200", "--batches", "50"], "memory/sqlite"),
    (["engine_fanout.py", "--activities", "30"], "sqlite / anchor"),
    (["engine_overhead.py", "--steps", "4", "--instances", "2", "--chunks", "4"], "outside the SDK, no cache / cache"),
    (["sdk_replay_cost.py", "--chunks", "4", "--repeat", "1"], "less time in the SDK call"),
    (["audit_stream_memory.py", "--records", "3000"], "ratio end / 2,000"),
    (
        ["record_path.py", "--records", "3000", "--id-set", "2000", "--variants", "floor", "reads", "new", "stdlib"],
        "same output bytes        True (new = stdlib)",
    ),
    (
        ["record_path.py", "--source", "exchange", "--records", "2000", "--id-set", "100"],
        "exact (records == truth) True",
    ),
    (
        ["collector_throughput.py", "--chunks", "3", "--ks", "1", "2", "--latency", "0.2", "--jitter", "0.1"],
        "speed-up",
    ),
    (
        [
            "window_busy.py",
            "--ks",
            "2",
            "--chunks",
            "4",
            "--graph-latency",
            "0.2",
            "--graph-jitter",
            "0.2",
            "--exchange-latency",
            "0.05",
            "--exchange-jitter",
            "0.05",
        ],
        "makespan / max(sum d / K, max d)",
    ),
    (
        [
            "switch_idle.py",
            "--k",
            "2",
            "--chunks",
            "4",
            "--per-execution",
            "2",
            "--graph-latency",
            "0.2",
            "--graph-jitter",
            "0.2",
            "--graph-records",
            "20",
            "--exchange-latency",
            "0.05",
            "--exchange-jitter",
            "0.05",
            "--exchange-records",
            "60",
        ],
        "share of lane time",
    ),
    (
        ["graph_polling.py", "--chunks", "3", "--k", "2", "--latency", "0.3", "--jitter", "0.5", "--scale", "300"],
        "delay/duration",
    ),
    (["orchestration_cpu.py", "--ns", "4", "8"], "per-chunk CPU at N=8 / N=4"),
    (
        [
            "realistic_cost.py",
            "--chunks",
            "2",
            "--graph-latency",
            "20",
            "--graph-jitter",
            "20",
            "--app",
            "a=.",
            "--app",
            "b=.",
            "--probe",
            "b",
        ],
        "a / b: CPU ms",
    ),
    (
        [
            "exchange_evidence.py",
            "--app",
            "a=.",
            "--app",
            "b=.",
            "--hours",
            "2",
            "--records-per-hour",
            "6000",
            "--latency",
            "0",
            "--services",
            "old",
            "capped-restart",
        ],
        "calls per 10,000 records",
    ),
    (["live_page.py", "--cells", "200", "400", "--steps", "3", "--chunks", "4", "--repeat", "40"], "per refresh, 400"),
    (
        ["tenant_budget.py", "--chunks", "2", "--collections", "1", "2", "--latency", "0.2", "--jitter", "0.1"],
        "vs alone",
    ),
    (["budget_episodes.py", "--chunks", "6", "--seeds", "1"], "version 2"),
]


@pytest.mark.parametrize(("argv", "marker"), CASES, ids=[case[0][0] for case in CASES])
def test_bench_script_runs_and_reports(argv: list[str], marker: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / argv[0]), *argv[1:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert marker in done.stdout
