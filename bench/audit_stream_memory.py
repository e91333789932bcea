"""Memory of streaming a large Graph audit query through the adapter, trim and de-duplication into a JSONL file.

The path is the export activity's: the adapter's pages through ``GraphReads`` (which keeps the chunk's ids and marks
each page) into the chunk writer's record rules (``ChunkRecords.page_lines``: trim, de-duplicate, the JSONL bytes),
written to a file. The emulator runs in a child process so only the collector side's memory is measured. The script
prints the resident set size (RSS) after the first ~2,000 records and after all of them; a ratio near 1 means memory
stays flat however many records flow through (only the id set grows, by design).

    .venv/bin/python bench/audit_stream_memory.py [--records 200000]
"""

from __future__ import annotations

import argparse
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


def _set_mib(reads: Any) -> float:
    """Memory of the reader's id set: the set's table and the id strings it keeps (``sys.getsizeof``)."""
    ids = reads._seen.ids  # the bench reads the reader's own set
    if not isinstance(ids, set):  # moved to the compact IdSet past Sightings.COMPACT_AFTER ids
        return float(ids.memory_bytes()) / 2**20
    return (sys.getsizeof(ids) + sum(sys.getsizeof(record_id) for record_id in ids)) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000, help="approximate records in the query")
    args = parser.parse_args()

    from activities.chunk_writer import ChunkRecords
    from activities.graph_export import GraphReads
    from shared.audit.config import AuditApiConfig
    from shared.audit.graph import GraphAuditClient
    from shared.audit.ports import AuditFilters, QueryState, TimeWindow
    from shared.records.raw_page import RawPage

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
        reads = GraphReads(client, query_id, client.get_query(query_id))
        rules = ChunkRecords(window)
        streamed = 0
        baseline: float | None = None
        peak_sampled = 0.0
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "chunk.jsonl"
            with out.open("wb") as sink:
                for page in reads.pages():
                    streamed += len(page.ids) if isinstance(page, RawPage) else len(page.records)
                    sink.write(rules.page_lines(page))
                    rss = _rss_mib()
                    peak_sampled = max(peak_sampled, rss)
                    if baseline is None and streamed >= 2000:
                        baseline = rss
            size_mib = out.stat().st_size / 2**20
        elapsed = time.perf_counter() - started
        written = rules.records
        client.delete_query(query_id)
        final = _rss_mib()
        peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        base = baseline or final
        print(f"records streamed      {streamed:,} (ground truth {urls['truth']:,}, written {written:,})")
        print(f"trimmed / duplicates  {rules.trimmed:,} / {rules.duplicates:,}")
        print(f"JSONL written         {size_mib:,.1f} MiB in {elapsed:.1f} s ({streamed / elapsed:,.0f} records/s)")
        print(f"RSS after 2,000       {base:,.1f} MiB")
        print(f"RSS after all         {final:,.1f} MiB   (peak sampled per page {peak_sampled:,.1f} MiB)")
        print(f"peak RSS (getrusage)  {peak_self:,.1f} MiB")
        print(f"ratio end / 2,000     {final / base:.2f}   ratio peak / 2,000 {peak_sampled / base:.2f}")
        ids = reads.exported
        id_set_mib = _set_mib(reads)
        print(f"id set of the chunk   {ids:,} ids ~ {id_set_mib:,.1f} MiB (grows with the count by design)")
        print(f"ratio excluding ids   {(final - id_set_mib) / base:.2f}")
        return 0 if written == urls["truth"] else 1
    finally:
        parent.send("stop")
        server.join(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
