"""Records end to end: the audit adapter → the chunk writer → the local-folder sink, one large chunk, side by side.

The path measured is the one an export activity runs: ``GraphAuditClient.iter_record_pages`` through
``activities.graph_export.GraphReads`` (or the Exchange client's session) over real HTTPS against the emulator, then
``activities.chunk_writer.write_chunk`` (Graph; for
Exchange, ``activities.exchange_calls.exchange_call`` once per InvokeCommand call, each a part, then the commit) into a
``LocalFolderSink`` (trim to the window, de-duplicate by id, serialise JSONL, SHA-256, fsync, atomic rename). The
emulator runs with zero latency (queries finish at once, no throttling, no broken pages; ``--page-latency`` adds a
wait before each page, as a real service has) in its own process; each
variant runs in a fresh collector process of its own, so its CPU time and peak RSS (``getrusage`` high-water mark)
are its alone.

Variants, each run against the same emulator in one invocation (``--repeat N`` runs them N times, interleaved, and
prints each variant's median):

* ``new``: this checkout as deployed (``orjson`` and ``msgspec`` used where the record path supports them);
* ``floor`` (Graph): the least any collector must do with the records, on one thread: the same HTTP client reads each
  records page (token, ``requests`` session, TLS, retry policy), the page is split into its records' bytes (the
  ``msgspec`` splitter of ``shared.records.raw_json``: one C pass that checks the page is JSON) and they are written
  as JSONL through the same sink (SHA-256, fsync, rename). Nothing else: no id or time read, no trimming,
  de-duplication, quarantine or filter check, no prefetch thread;
* ``reads`` (Graph): the floor, and each page's records' ``id`` and ``createdDateTime`` read as the collector reads
  them (``shared.audit.record_lines.graph_page``: a second C pass over the page, the times parsed). Exactly-once needs
  the ids and the chunk's bounds need the times, so no collector that keeps those promises goes below it; the floor
  shows what reading them costs;
* ``old``: the checkout given with ``--old PATH`` (e.g. ``git worktree add /tmp/records-main main``), run exactly as
  ``new`` (its own code imported from that path);
* ``stdlib``: ``new`` with the ``orjson`` and ``msgspec`` imports blocked, so the record path uses the standard
  library's ``json`` (what a worker without the wheels would do; it must write the same bytes);
* ``prefetch``: as ``new``, but the next page is fetched in a worker thread while this one is written
  (``shared.records.prefetch``, what the writer did before it fetched in turn), to show what overlapping fetch and
  processing gives and costs (run it with ``--page-latency`` for a service that takes a while per page);
* ``decoded`` (Exchange): as ``new``, but each row's ``AuditData`` decoded whole and written again (keys sorted) as
  the collector did before, instead of its text written as the service sent it: the two options for the one field
  Exchange sends as a string, side by side.

Printed per variant: records written (and the emulator's ground truth, which they must equal), wall seconds from the
first page request to the summary, records/s, the collector's CPU µs per record (user + system of the collector
process, emulator excluded), how busy the emulator process was (CPU seconds / wall seconds: near 1.0 means the
emulator, not the collector, sets the pace), the peak RSS and the object's SHA-256; then each variant's CPU per
record against the floor's. A last section compares the id sets' memory per id (``tracemalloc``) and time to add
an id: a plain ``set`` of id strings, the compact ``IdBuckets``, the Graph reader's ``Sightings`` and the
``Deduplicator``.

    .venv/bin/python bench/record_path.py --records 200000 --old /tmp/records-main --repeat 3
    .venv/bin/python bench/record_path.py --source exchange --records 50000 --old /tmp/records-main
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TENANT = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"
DOMAIN = "contoso.onmicrosoft.com"
CLIENT = "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
SECRET = "bench-secret-value"
START = datetime(2024, 6, 1, tzinfo=UTC)
HOURS = 10
ROOT = str(Path(__file__).resolve().parents[1])
VARIANTS = ("floor", "reads", "new", "old", "stdlib", "prefetch", "decoded")
FLOORS = ("floor", "reads")


def _serve(conn: Any, records_per_hour: float, page_latency: float) -> None:
    from m365_emulator import (
        AppRegistration,
        EmulatorConfig,
        ExchangeSettings,
        FaultConfig,
        GraphSettings,
        TenantSpec,
        run_emulator,
    )

    config = EmulatorConfig(
        tenants=[TenantSpec(tenant_id=TENANT, domain=DOMAIN, seed=3, records_per_hour=records_per_hour)],
        # The adapter alone, no collector window to resubmit a query the service fails, loses or leaves running:
        # the path measured needs one that finishes.
        graph=GraphSettings(
            completion_delay_seconds=0.0, record_count_limit=100_000_000, fail_rate=0, vanish_rate=0, stuck_rate=0
        ),
        # A service whose sessions continue and whose answers are true (the record path is measured here, not what
        # the collector does when a session restarts or a first answer is false: bench/exchange_evidence.py).
        exchange=ExchangeSettings(
            session_cap=10_000_000,
            max_concurrent_sessions=10,
            result_count="total",
            over_delivery=0.0,
            session_mode="continue",
            unsorted=False,
            cancel_warning_rate=0.0,
            transient_400_rate=0.0,
            false_answer_rate=0.0,
            page_size_mode="fixed",
        ),
        faults=FaultConfig(broken_page_rate=0.0, slow_page_seconds=page_latency),
    )
    import psutil

    me = psutil.Process()
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
        while conn.recv() == "cpu":  # the parent asks for CPU seconds around each run; anything else stops
            times = me.cpu_times()
            conn.send(times.user + times.system)


def _collect(conn: Any, variant: str, source: str, urls: dict[str, Any], session_cap: int, root: str) -> None:
    """One collector process: export the whole window as one chunk through ``write_chunk``; report figures."""
    if root != ROOT:  # the old checkout's code, not this one's
        sys.path[:] = [root, *(entry for entry in sys.path if Path(entry or ".").resolve() != Path(ROOT))]
    if variant == "stdlib":
        sys.modules["orjson"] = None  # type: ignore[assignment]  # makes ``import orjson`` fail
        sys.modules["msgspec"] = None  # type: ignore[assignment]
    import activities.chunk_writer
    from activities.chunk_writer import write_chunk

    if variant == "decoded":
        _decode_audit_data()
    from shared.audit.config import AuditApiConfig
    from shared.audit.ports import AuditFilters, QueryState, TimeWindow
    from shared.models import Chunk
    from shared.sinks.local import LocalFolderSink

    config = AuditApiConfig(
        tenant_id=TENANT if source == "graph" else DOMAIN,
        client_id=CLIENT,
        client_secret=SECRET,
        authority_host=urls["authority_host"],
        graph_base_url=urls["graph_base_url"],
        exchange_base_url=urls["exchange_base_url"],
        ca_bundle=urls["ca_bundle"],
        page_size=1000,
    )
    window = TimeWindow(START, START + timedelta(hours=HOURS))
    chunk = Chunk(window.start, window.end)
    if source == "graph":
        from shared.audit.graph import GraphAuditClient

        graph = GraphAuditClient(config)
        query_id = graph.create_query(window, AuditFilters(), display_name="bench")
        while graph.get_query(query_id).state is QueryState.PENDING:
            time.sleep(0.01)
        if variant in FLOORS:
            pages = _floor_pages(graph, query_id, reads=variant == "reads")
        else:  # as the export activity reads a finished query: its pages, checked against its count
            from activities.graph_export import GraphReads

            pages = GraphReads(graph, query_id, graph.get_query(query_id)).pages()
            if variant == "prefetch":
                from shared.records.prefetch import prefetched

                pages = prefetched(pages, name="chunk-pages")
    else:
        from shared.audit.exchange import ExchangeAuditClient

        exchange = ExchangeAuditClient(config, session_cap=session_cap)
        exchange.probe(window, result_size=1)  # sign in and warm the connection like the Graph case's create
    import json as _json  # noqa: F401  - both variants pay this import before the baseline

    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send("ready")
    conn.recv()
    cpu0 = time.process_time()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if variant in FLOORS:
            summary = _floor_write(LocalFolderSink(tmp), pages)
        elif source == "graph":
            summary = write_chunk(
                LocalFolderSink(tmp), tenant_id=DOMAIN, collection_id="bench", chunk=chunk, pages=pages, attempt=1
            )
        else:
            summary = _exchange_calls(exchange, LocalFolderSink(tmp), chunk)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    uses_orjson = "orjson" in sys.modules and sys.modules["orjson"] is not None
    loaded = activities.chunk_writer.__file__ or ""
    if not loaded.startswith(root):
        raise SystemExit(f"{variant}: imported {loaded}, not the code under {root}")
    conn.send(
        {
            "records": summary.records,
            "trimmed": summary.trimmed,
            "duplicates": summary.duplicates,
            "malformed": getattr(summary, "malformed", 0),
            "bytes": summary.bytes,
            "sha256": summary.sha256,
            "seconds": elapsed,
            "cpu": cpu,
            "baseline_mib": baseline,
            "peak_mib": peak,
            "orjson_loaded": uses_orjson,
        }
    )


def _decode_audit_data() -> None:
    """Exchange rows normalised whole, ``AuditData`` decoded and encoded again (the ``decoded`` variant)."""
    import shared.audit.exchange
    from shared.audit import record_lines
    from shared.audit.ports import MalformedRecord
    from shared.records.raw_page import RawPage

    def decoded_page(rows: Any) -> Any:
        lines, ids, times, malformed = [], [], [], []
        for row in rows:
            found = record_lines._normalised_row(row)
            if isinstance(found, MalformedRecord):
                malformed.append(found)
            else:
                lines.append(found[0])
                ids.append(found[1])
                times.append(found[2])
        return RawPage(lines, ids, times, malformed)

    shared.audit.exchange.exchange_page = decoded_page  # type: ignore[attr-defined]


def _floor_pages(graph: Any, query_id: str, *, reads: bool = False) -> Any:
    """The floor's pages: each records page read by the adapter's own HTTP client and split into its records' bytes,
    as JSONL (see the module docstring); nothing else is read or checked."""
    from shared.records.raw_json import split_page

    def split(body: bytes) -> Any:
        page = split_page(body, items_key="value", members=("@odata.nextLink",))
        if reads and page.items:  # ``reads``: each record's id and time read too, as exactly-once needs them
            from shared.audit.record_lines import graph_page

            graph_page(page.items, body=body)
        return page

    url: str | None = f"{graph._query_url(query_id)}/records"  # the bench reads the adapter's own HTTP client
    params: dict[str, str] | None = {"$top": "1000"}
    while url is not None:
        page = graph._http.request_page(url, params=params, split=split)
        items = page.items or []
        if items:
            items.append(b"")
            yield len(items) - 1, b"\n".join(items)
        following = page.members["@odata.nextLink"]
        url, params = (following if isinstance(following, str) and following else None), None


def _floor_write(sink: Any, pages: Any) -> Any:
    """The floor's write: the same sink (SHA-256, fsync, rename) as the collector's chunk object."""
    from types import SimpleNamespace

    count = 0

    def lines() -> Any:
        nonlocal count
        for records, data in pages:
            count += records
            yield data

    stored = sink.write_stream("floor.jsonl", lines())
    return SimpleNamespace(
        records=count, trimmed=0, duplicates=0, malformed=0, bytes=stored.bytes, sha256=stored.sha256
    )


def _exchange_calls(exchange: Any, sink: Any, chunk: Any) -> Any:
    """The chunk as the collector's Exchange lane reads it: one ``exchange_call`` activity body per InvokeCommand call
    (each a part of the chunk's object), the cursor carried from one to the next, until the last one commits."""
    from dataclasses import replace

    from activities.chunk_parts import ChunkParts
    from activities.exchange_calls import exchange_call
    from shared.models import ChunkSummary
    from shared.sources.exchange.calls import ExchangeCall
    from shared.window.calls import ChunkCall

    parts = ChunkParts(sink, tenant_id=DOMAIN, collection_id="bench", chunk=chunk)
    call = ExchangeCall(ChunkCall("bench", DOMAIN, chunk.to_json(), {}))
    while True:
        result = exchange_call(exchange, parts, call)
        if not result.ok:
            raise RuntimeError(f"exchange call failed: {result.error}")
        if "summary" in result.data:
            return ChunkSummary.from_json(result.data["summary"])
        call = replace(call, cursor=result.data["cursor"], number=call.number + 1)


def _run_variant(variant: str, args: argparse.Namespace, urls: dict[str, Any], server: Any) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    root = str(Path(args.old).resolve()) if variant == "old" else ROOT
    worker = ctx.Process(target=_collect, args=(child, variant, args.source, urls, args.records * 2, root), daemon=True)
    worker.start()
    if not parent.poll(600) or parent.recv() != "ready":
        raise SystemExit(f"{variant}: the collector process did not start")
    server.send("cpu")
    emu_cpu0 = server.recv()
    parent.send("go")
    while not parent.poll(5):
        if not worker.is_alive():
            raise SystemExit(f"{variant}: the collector process died (its error is above)")
    result: dict[str, Any] = parent.recv()
    server.send("cpu")
    result["emulator_cpu"] = server.recv() - emu_cpu0
    worker.join(timeout=60)
    return result


def _id_sets(count: int) -> list[tuple[str, float, float]]:
    """Bytes per id held and µs per id added, page by page (tracemalloc for the bytes, a separate untraced run for the
    time, same ids): a plain set of GUID strings, the compact ``IdBuckets`` alone, the Graph reader's ``Sightings`` (a
    set up to 100,000 ids, then ``IdBuckets``) and the ``Deduplicator`` (``IdSet``) other writers use."""
    from shared.records.raw_page import Sightings
    from shared.records.rules import Deduplicator

    ids = [str(uuid.UUID(int=(n * 0x9E3779B97F4A7C15_F39CC0605CEDC835) % (1 << 128), version=4)) for n in range(count)]
    pages = [ids[start : start + 1000] for start in range(0, count, 1000)]
    moment = START

    def plain() -> Any:
        seen: set[str] = set()
        for page in pages:
            seen.update(page)
        return seen

    def buckets() -> Any:
        return _fill(Sightings(compact_after=0), pages, moment)

    def sightings() -> Any:
        return _fill(Sightings(), pages, moment)

    def dedupe() -> Any:
        kept = Deduplicator()
        for page in pages:
            kept.filter([{"id": record_id} for record_id in page])
        return kept

    rows = []
    # The id strings a structure keeps alive are counted too (a chunk's set keeps them after the records are gone).
    for name, build, keeps_strings in (
        ("set of str", plain, count),
        ("IdBuckets", buckets, 0),
        ("Sightings", sightings, min(count, Sightings.COMPACT_AFTER)),
        ("Deduplicator (IdSet)", dedupe, 0),
    ):
        started = time.perf_counter()
        build()
        seconds = time.perf_counter() - started
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        held = build()
        size = tracemalloc.get_traced_memory()[0] - before + keeps_strings * sys.getsizeof(ids[0])
        tracemalloc.stop()
        del held
        rows.append((name, size / count, seconds / count * 1e6))
    return rows


def _fill(sightings: Any, pages: list[list[str]], moment: Any) -> Any:
    from shared.records.raw_page import RawPage

    for page in pages:
        sightings.mark(RawPage([b""] * len(page), page, [moment] * len(page)))
    return sightings.ids


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="approximate records in the window")
    parser.add_argument("--source", choices=("graph", "exchange"), default="graph")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, help="default: floor new (old with --old)")
    parser.add_argument("--old", metavar="PATH", help="a checkout of the code to compare with (variant old)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each variant, interleaved (medians printed)")
    parser.add_argument("--id-set", type=int, default=200_000, help="ids for the de-duplicator memory comparison")
    parser.add_argument(
        "--page-latency", type=float, default=0.0, help="seconds the emulator waits before each page (0: zero latency)"
    )
    args = parser.parse_args()
    variants = args.variants or ["floor", "new", *(["old"] if args.old else [])]
    if "old" in variants and not args.old:
        parser.error("variant old needs --old PATH")
    for floor in FLOORS:
        if args.source != "graph" and floor in variants:
            variants.remove(floor)  # the floors are defined for Graph pages
    if args.source == "graph" and "decoded" in variants:
        variants.remove("decoded")  # Exchange's AuditData only
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)

    ctx = mp.get_context("spawn")
    server, child = ctx.Pipe()
    emulator = ctx.Process(target=_serve, args=(child, args.records / HOURS, args.page_latency), daemon=True)
    emulator.start()
    urls = server.recv()
    runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
    try:
        for _ in range(args.repeat):
            for variant in variants:
                runs[variant].append(_run_variant(variant, args, urls, server))
    finally:
        server.send("stop")
        emulator.join(timeout=30)
    truth = urls["truth"]
    latency = f"{args.page_latency * 1000:.0f} ms per page" if args.page_latency else "zero latency"
    print(f"{args.source}: one chunk of {HOURS} h, {truth:,} records in the window, emulator at {latency}")
    print(f"{args.repeat} run(s) of each variant, interleaved; medians (CPU per row: every row the service sent)")
    print(
        f"{'variant':<8} {'records':>9} {'rows':>9} {'seconds':>8} {'rows/s':>9} {'CPU µs/row':>10} "
        f"{'(runs)':>18} {'emu busy':>8} {'peak RSS':>9}  sha256"
    )
    exact = True
    cpu: dict[str, float] = {}
    for variant, results in runs.items():
        for r in results:
            r["rows"] = r["records"] + r["trimmed"] + r["duplicates"] + r.get("malformed", 0)
            r["per_row"] = r["cpu"] / max(r["rows"], 1) * 1e6
            exact = exact and (variant in FLOORS or r["records"] == truth)
        r = results[0]
        cpu[variant] = _median([x["per_row"] for x in results])
        seconds = _median([x["seconds"] for x in results])
        each = " ".join(f"{x['per_row']:.1f}" for x in results)
        print(
            f"{variant:<8} {r['records']:>9,} {r['rows']:>9,} {seconds:>8.2f} {r['rows'] / seconds:>9,.0f} "
            f"{cpu[variant]:>10.1f} {each:>18} {_median([x['emulator_cpu'] / x['seconds'] for x in results]):>8.0%} "
            f"{_median([x['peak_mib'] for x in results]):>8.1f}M  {r['sha256'][:16]}"
        )
    if "floor" in cpu:
        for variant in variants:
            if variant != "floor":
                print(f"{variant + ' / floor':<16} {cpu[variant] / cpu['floor']:.2f}x CPU per row")
    if "reads" in cpu and "new" in cpu:
        print(f"{'new / reads':<16} {cpu['new'] / cpu['reads']:.2f}x CPU per row")
    if "old" in cpu and "new" in cpu:
        print(f"{'old / new':<16} {cpu['old'] / cpu['new']:.2f}x CPU per row")
    for group in (("new", "stdlib", "prefetch"), ("decoded", "old")):  # the same format: the same bytes
        hashes = {v: {r["sha256"] for r in runs[v]} for v in group if v in runs}
        if len(hashes) > 1 or any(len(h) > 1 for h in hashes.values()):
            same = len(set().union(*hashes.values())) == 1
            print(f"same output bytes        {same} ({' = '.join(hashes)})")
    print(f"id sets, {args.id_set:,} ids added 1,000 at a time (bytes held per id, tracemalloc; µs to add one)")
    for name, size, micros in _id_sets(args.id_set):
        print(f"  {name:<22} {size:>6,.0f} B  {micros:>6.2f} µs")
    print(f"exact (records == truth) {exact}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
