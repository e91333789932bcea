"""Memory of streaming a large Graph audit query through the adapter, trim and de-duplication into a JSONL file.

The emulator runs in a child process so only the collector side's memory is measured. The script prints the resident
set size (RSS) after the first ~2,000 records and after all of them; a ratio near 1 means memory stays flat however
many records flow through (only the de-duplicator's id set grows, by design).

    .venv/bin/python bench/audit_stream_memory.py [--records 200000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TENANT = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"
CLIENT = "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
SECRET = "bench-secret-value"
START = datetime(2024, 6, 1, tzinfo=UTC)
HOURS = 10


def _serve(conn: Any, records_per_hour: float) -> None:
    from m365_emulator import AppRegistration, EmulatorConfig, GraphSettings, TenantSpec, run_emulator

    config = EmulatorConfig(
        tenants=[TenantSpec(tenant_id=TENANT, seed=3, records_per_hour=records_per_hour)],
        # The adapter alone, no collector window to resubmit a query the service fails, loses or leaves running:
        # the stream measured needs one that finishes.
        graph=GraphSettings(completion_delay_seconds=0.1, bleed_fraction=0.0, fail_rate=0, vanish_rate=0, stuck_rate=0),
    )
    with run_emulator(config) as emu:
        emu.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        truth = len(emu.ground_truth_ids(TENANT, START, START + timedelta(hours=HOURS)))
        conn.send(
            {
                "authority_host": emu.authority_host,
                "graph_base_url": emu.graph_base_url,
                "exchange_base_url": emu.exchange_base_url,
                "ca_bundle": str(emu.ca_bundle),
                "truth": truth,
            }
        )
        conn.recv()  # wait until the parent is done


def _rss_mib() -> float:
    return psutil.Process(os.getpid()).memory_info().rss / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000, help="approximate records in the query")
    args = parser.parse_args()

    from shared.audit.config import AuditApiConfig
    from shared.audit.graph import GraphAuditClient
    from shared.audit.ports import AuditFilters, QueryState, TimeWindow
    from shared.records.rules import Deduplicator, trim_to_window

    parent, child = mp.Pipe()
    server = mp.get_context("spawn").Process(target=_serve, args=(child, args.records / HOURS), daemon=True)
    server.start()
    urls = parent.recv()
    try:
        config = AuditApiConfig(
            tenant_id=TENANT,
            client_id=CLIENT,
            client_secret=SECRET,
            authority_host=urls["authority_host"],
            graph_base_url=urls["graph_base_url"],
            exchange_base_url=urls["exchange_base_url"],
            ca_bundle=urls["ca_bundle"],
            page_size=1000,
        )
        window = TimeWindow(START, START + timedelta(hours=HOURS))
        client = GraphAuditClient(config)
        query_id = client.create_query(window, AuditFilters(), display_name="bench")
        while client.get_query(query_id).state is QueryState.PENDING:
            time.sleep(0.05)
        dedupe = Deduplicator()
        streamed = written = trimmed = 0
        baseline: float | None = None
        peak_sampled = 0.0
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "chunk.jsonl"
            with out.open("w", encoding="utf-8") as sink:
                for page in client.iter_record_pages(query_id):
                    streamed += len(page.records)
                    kept, removed = trim_to_window(page.records, window)
                    trimmed += removed
                    unique, _ = dedupe.filter(kept)
                    for record in unique:
                        sink.write(json.dumps(record, separators=(",", ":")) + "\n")
                    written += len(unique)
                    rss = _rss_mib()
                    peak_sampled = max(peak_sampled, rss)
                    if baseline is None and streamed >= 2000:
                        baseline = rss
            size_mib = out.stat().st_size / 2**20
        elapsed = time.perf_counter() - started
        client.delete_query(query_id)
        final = _rss_mib()
        peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        base = baseline or final
        print(f"records streamed      {streamed:,} (ground truth {urls['truth']:,}, written {written:,})")
        print(f"trimmed / duplicates  {trimmed:,} / {dedupe.duplicates_removed:,}")
        print(f"JSONL written         {size_mib:,.1f} MiB in {elapsed:.1f} s ({streamed / elapsed:,.0f} records/s)")
        print(f"RSS after 2,000       {base:,.1f} MiB")
        print(f"RSS after all         {final:,.1f} MiB   (peak sampled per page {peak_sampled:,.1f} MiB)")
        print(f"peak RSS (getrusage)  {peak_self:,.1f} MiB")
        print(f"ratio end / 2,000     {final / base:.2f}   ratio peak / 2,000 {peak_sampled / base:.2f}")
        id_set_mib = (
            dedupe.memory_bytes() / 2**20
        )  # the GUID table of shared.records.id_set (the emulator's ids are GUIDs)
        print(f"id set of the dedupe  {len(dedupe):,} ids ~ {id_set_mib:,.1f} MiB (grows with the count by design)")
        print(f"ratio excluding ids   {(final - id_set_mib) / base:.2f}")
        return 0 if written == urls["truth"] else 1
    finally:
        parent.send("stop")
        server.join(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
