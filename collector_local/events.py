"""A local run's structured log events, and what docs/operations.md's three queries return over them.

``run-local --events FILE`` writes each event (``shared.log_fields``) as a JSON line with its time; this module
answers the queries the operator runs in Application Insights (``KQL``) over such a file, so the documentation shows
the output the queries give, from a real run:

    .venv/bin/python -m collector_local.events FILE [--collection ID]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.log_fields import parse_event

APP_LOGGERS = ("orchestrators", "activities", "http_api", "shared")


class EventFile(logging.Handler):
    """Writes every structured event of the app's loggers to a JSON-lines file, with the record's time."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.INFO)
        self._file = path.open("a", encoding="utf-8")

    def emit(self, record: logging.LogRecord) -> None:
        fields = parse_event(record.getMessage())
        if fields is not None:
            stamp = datetime.fromtimestamp(record.created, UTC).isoformat().replace("+00:00", "Z")
            self._file.write(json.dumps({"timestamp": stamp, **fields}) + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()
        super().close()


def record_events(path: Path) -> EventFile:
    """Start writing the app's events to ``path`` (their loggers log at INFO from now on)."""
    handler = EventFile(path)
    for name in APP_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    logging.getLogger().addHandler(handler)
    return handler


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def failed_chunks(events: list[dict[str, Any]], collection_id: str) -> list[dict[str, Any]]:
    rows = [
        {
            "timestamp": e["timestamp"],
            "chunkStart": e.get("chunkStart"),
            "chunkEnd": e.get("chunkEnd"),
            "errorKind": e.get("errorKind"),
            "attempts": e.get("attempts"),
            "error": e.get("error"),
        }
        for e in events
        if e["event"] == "chunk.ended" and e.get("outcome") == "failed" and e.get("collectionId") == collection_id
    ]
    return sorted(rows, key=lambda row: str(row["chunkStart"]))


def throttling(events: list[dict[str, Any]], bin_minutes: int = 5) -> list[dict[str, Any]]:
    counts: Counter[tuple[str, str, str]] = Counter()
    for e in events:
        if e["event"] == "api.throttled":
            moment = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00"))
            start = moment.replace(minute=moment.minute - moment.minute % bin_minutes, second=0, microsecond=0)
            counts[(str(e.get("tenantId")), str(e.get("source")), start.isoformat().replace("+00:00", "Z"))] += 1
    rows = [{"tenantId": t, "source": a, "timestamp": s, "throttled": n} for (t, a, s), n in counts.items()]
    return sorted(rows, key=lambda row: (row["timestamp"], row["tenantId"], row["source"]))


def slowest_chunks(events: list[dict[str, Any]], top: int = 10) -> list[dict[str, Any]]:
    rows = [
        {
            "timestamp": e["timestamp"],
            "collectionId": e.get("collectionId"),
            "chunkStart": e.get("chunkStart"),
            "chunkEnd": e.get("chunkEnd"),
            "seconds": float(e.get("seconds") or 0.0),
            "records": e.get("records"),
        }
        for e in events
        if e["event"] == "chunk.ended" and e.get("outcome") == "done"
    ]
    return sorted(rows, key=lambda row: -row["seconds"])[:top]


def table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of ``rows`` (the Logs blade's grid, in text)."""
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join("" if row[c] is None else str(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m collector_local.events", description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="events written by run-local --events")
    parser.add_argument("--collection", help="collection id for the failed-chunks query (default: the first seen)")
    args = parser.parse_args(argv)
    events = read_events(args.file)
    collection = args.collection or next((e["collectionId"] for e in events if "collectionId" in e), "")
    print(f"## Failed chunks of collection {collection}\n\n{table(failed_chunks(events, collection))}\n")
    print(f"## Throttling by tenant over time (5-minute bins)\n\n{table(throttling(events))}\n")
    print(f"## Slowest chunks\n\n{table(slowest_chunks(events))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
