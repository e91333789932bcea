"""The audit HTTP client checks the lane's slot deadline right before each request it sends (issue 18.2), over
real HTTPS against the emulator: a Graph export stops between pages once the deadline passes; an Exchange block
started before it is read to its end (its nextLink pages continue it) and the next block is not started."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from m365_emulator import ExchangeSettings
from shared.audit.exchange import ExchangeAuditClient
from shared.audit.exchange_session import read_window
from shared.audit.graph import GraphAuditClient
from shared.audit.ports import AuditFilters, QueryState
from shared.budget.slot_deadline import SlotDeadline
from shared.errors import SlotExpiredError
from tests.audit.conftest import FAST, Emu, register, start_emulator, wait_for_query, window

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def after_checks(passing: int) -> tuple[Callable[[], datetime], list[int]]:
    """A clock that reads before the deadline for the first ``passing`` checks, after it from then on."""
    checks = [0]

    def clock() -> datetime:
        checks[0] += 1
        return T0 if checks[0] <= passing else T0 + timedelta(hours=1)

    return clock, checks


def test_a_graph_export_stops_between_pages_once_the_deadline_passes(emu: Emu, monkeypatch: pytest.MonkeyPatch) -> None:
    for knob in ("unknown_error_rate", "gateway_error_rate"):  # a request sent again is checked again: none here
        monkeypatch.setattr(emu.handle.config.graph, knob, 0.0)
    client = GraphAuditClient(emu.config(page_size=50), retry_wait_scale=FAST)
    query_id = client.create_query(window(13, offset_hours=6), AuditFilters(), display_name="slot deadline")
    assert wait_for_query(client, query_id).state is QueryState.SUCCEEDED
    clock, checks = after_checks(3)
    pages = []
    deadline = SlotDeadline(T0 + timedelta(minutes=1), clock=clock)
    with deadline.guarding(every_request=True), pytest.raises(SlotExpiredError, match="GET not started"):
        pages.extend(client.iter_record_pages(query_id))
    assert len(pages) == 3 and checks[0] == 4  # three pages read, the fourth never requested


@pytest.fixture(scope="module")
def small_pages() -> Iterator[Emu]:
    settings = ExchangeSettings(page_size=100, page_size_mode="fixed", false_answer_rate=0.0)
    with start_emulator(exchange=settings) as handle:
        register(handle)
        yield Emu(handle)


def test_an_exchange_block_started_before_the_deadline_is_read_to_its_end_and_the_next_is_not_started(
    small_pages: Emu,
) -> None:
    client = ExchangeAuditClient(small_pages.exchange_config(), retry_wait_scale=FAST, result_size=300)
    clock, checks = after_checks(1)
    blocks = []
    deadline = SlotDeadline(T0 + timedelta(minutes=1), clock=clock)
    with deadline.guarding(every_request=False), pytest.raises(SlotExpiredError, match="not started"):
        for pages, _ in read_window(client, window(13, offset_hours=6), AuditFilters()):
            blocks.append(pages)
    assert len(blocks) == 1 and len(blocks[0]) == 3  # one block of 300 rows in three pages of 100
    assert checks[0] == 2  # checked for each block's first request only
