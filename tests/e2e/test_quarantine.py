"""Issue 12, item 1: malformed records follow the same window and de-duplication rules as good ones.

The emulator corrupts chosen records (their audit payload becomes truncated JSON; id and time stay readable, as in a
real record whose payload broke). Graph returns each chunk's query with a boundary bleed: the first records after the
chunk's end. A malformed record in that bleed reaches two chunks' queries (or, after the range's end, one query of a
chunk it does not belong to). It must be quarantined exactly once, in the chunk whose window holds it, and only when
that window is inside the collection's range.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from shared.records.rules import parse_timestamp
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, body, serve

HOURS = 6


def _marked(truth: list[dict[str, object]], end: datetime) -> tuple[set[str], set[str]]:
    """(in-range ids, out-of-range ids) to corrupt: each hour's first record (Graph's bleed into the chunk before),
    a record inside each hour, and the first record after the range's end (bleed into the last chunk only)."""
    by_hour: dict[int, list[str]] = {}
    for record in truth:
        moment = parse_timestamp(str(record["createdDateTime"]))
        by_hour.setdefault(int((moment - START).total_seconds() // 3600), []).append(str(record["id"]))
    inside = {ids[0] for hour, ids in by_hour.items() if 1 <= hour < HOURS}
    inside |= {ids[len(ids) // 2] for hour, ids in by_hour.items() if hour < HOURS}
    outside = {by_hour[HOURS][0]}
    return inside, outside


@pytest.mark.parametrize("source", ["graph", "exchange"])
def test_malformed_records_are_quarantined_once_in_their_own_window(
    make_emulator: MakeEmulator, tmp_path: Path, source: str
) -> None:
    emulator = make_emulator(records_per_hour=60.0)
    end = START + timedelta(hours=HOURS)
    truth = list(emulator.ground_truth_records(TENANT, START, end + timedelta(hours=1)))
    inside, outside = _marked(truth, end)
    assert len(inside) == 2 * HOURS - 1 and len(outside) == 1  # 12 marked records, 11 of them in the range
    emulator.faults.malformed_record_ids = frozenset(inside | outside)

    with serve(emulator, tmp_path) as host:
        assert host.post(body(end, interval=60, k=2, source=source, collectionId="bad")).status_code == 202
        summary = host.wait("bad")
    assert summary["status"] == "Completed", summary

    in_range = [r for r in truth if parse_timestamp(str(r["createdDateTime"])) < end]
    good_ids = sorted(str(r["id"]) for r in in_range if r["id"] not in inside)
    assert sorted(host.chunk_ids("bad")) == good_ids  # nothing malformed in the output, nothing good lost

    manifest = host.manifest("bad")
    assert manifest["totals"]["malformed"] == len(inside)
    assert manifest["totals"]["records"] + manifest["totals"]["malformed"] == len(in_range)

    # Where each marked id was quarantined: (chunk window, id) for every quarantine line that mentions it.
    placed: list[tuple[str, str]] = []
    for path in sorted((host.folder("bad") / "chunks").glob("*.quarantine.jsonl")):
        for line in path.read_text().splitlines():
            raw = json.loads(line)["raw"]
            placed += [(path.name.split(".")[0], marked) for marked in inside | outside if marked in raw]
    times = {str(r["id"]): parse_timestamp(str(r["createdDateTime"])) for r in truth}
    assert sorted(marked for _, marked in placed) == sorted(inside), "each in-range record once, none outside"
    for window, marked in placed:
        first, last = (datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=START.tzinfo) for stamp in
                       window.split("_"))  # fmt: skip
        assert first <= times[marked] < last, (marked, window)
