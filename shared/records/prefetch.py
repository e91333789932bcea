"""Fetch the next item while the current one is processed: one worker thread, one item ahead, errors in order.

The chunk writer no longer uses it (it fetches pages in turn: the thread hand-offs cost more CPU than the overlap
saved wall time once a page takes the service a while, see ``activities.chunk_writer``); ``bench/record_path.py``'s
``prefetch`` variant runs the writer with it, to keep that comparison measurable.

An export reads pages over HTTP (mostly waiting for the service, with the GIL released) and then decodes, trims,
de-duplicates and writes them (CPU). Done in turn, neither overlaps the other. :func:`prefetched` runs the page
iterator in a worker thread so the next page is being fetched while the caller works on the current one:

* bounded: the worker starts fetching item k+1 only once the caller has taken item k, so at most two items are
  alive at once (the caller's and the one being fetched) however slow the caller is;
* in order: items arrive in the source's order, and an exception the source raises reaches the caller after every
  item produced before it, as the same exception object (its type decides retries and splits);
* contained: when the caller stops early (an exception, ``close()``), the worker is told to stop, the source is
  closed in the worker's thread (so its ``finally`` blocks run where it ran), and the worker is joined before the
  caller goes on: nothing keeps using the source's HTTP session afterwards. Joining waits for a fetch already in
  flight (one page, with its retries) to end.

The worker runs in a copy of the caller's ``contextvars`` context. Log records it emits carry the worker's thread
name (the Azure Functions Python worker attributes a log to an invocation through its thread, so on Azure the
adapter's log lines from the worker may show without the invocation id).
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Generator, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

_ITEM, _ERROR, _END = 0, 1, 2


def prefetched(source: Iterable[T], *, name: str = "prefetch") -> Generator[T, None, None]:
    """The items of ``source``, each fetched in a worker thread while the caller processes the one before."""
    handoff: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
    room = threading.Semaphore(1)  # released when the caller takes an item: the worker may fetch the next one
    stop = threading.Event()

    def work() -> None:
        iterator = iter(source)
        try:
            while True:
                room.acquire()
                if stop.is_set():
                    return
                try:
                    item = next(iterator)
                except StopIteration:
                    handoff.put((_END, None))
                    return
                except BaseException as exc:  # handed to the caller, which raises it
                    handoff.put((_ERROR, exc))
                    return
                handoff.put((_ITEM, item))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    context = contextvars.copy_context()
    worker = threading.Thread(target=context.run, args=(work,), name=name, daemon=True)
    worker.start()
    try:
        while True:
            kind, value = handoff.get()
            if kind == _ITEM:
                room.release()
                yield value
            elif kind == _ERROR:
                raise value
            else:
                return
    finally:
        stop.set()
        room.release()
        worker.join()
