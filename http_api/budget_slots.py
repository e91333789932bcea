"""Tenant-budget slots from the HTTP edge (``cancel`` gives a collection's back, ``doctor`` takes one).

An HTTP trigger holds a Durable client, which can only signal an entity and read its state: it cannot call one and
wait for the answer as an orchestration does. So a slot is asked for the way a lane asks, with the same operations,
and the answer is read from the state: ``acquire`` is signalled, and the holder is granted once it is among the
state's ``leases`` (queued while among its ``waiters``); a queued holder signals ``acquire`` again every poll period
(a grant is only ever made to a holder that asks, and a queue place lapses when its holder stops asking). Signals
reach the entity through its queue, which the task hub polls, so every wait here is bounded and the answer says what
it saw.

The doctor's Graph probe submits a query, so its Graph slot also takes a credit of the tenant's daily Graph quota
(``submit``, number 1 of its one-off holder: asking again takes it once). When the state shows the allowance spent, it
stops asking at once and says until when (``quotaUntil``): a probe is not worth a wait of hours. Every further query
the doctor submits (the service-filter probe's, one submitted again after the service failed or lost one) takes one
more credit while the slot is held (:meth:`Slot.credit`, numbers 2, 3, ...; :class:`SlotCredits` hands them to the
doctor's worker thread); a refused one is not submitted, and the entity gives the slot back then.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from http_api.common import DurableClient
from orchestrators.budget_entity import entity_id
from shared.budget.quota import quota_view
from shared.budget.wire import BudgetOptions, collection_of, holder_id
from shared.models import JsonDict, parse_iso

_T = TypeVar("_T")

BudgetToken = Callable[[str, str], str]
"""(collection id, run id) -> the token the budget entity expects with that run's operations ("" for none):
``Settings.budget_token``."""


def no_token(collection: str, run: str) -> str:
    return ""


def _with_token(data: JsonDict, token: str) -> JsonDict:
    return {**data, "token": token} if token else data


RELEASE_WAIT_SECONDS = 10.0
CREDIT_WAIT_SECONDS = 20.0
"""Longest wait for the budget's answer to a credit asked for while the slot is held (then nothing is submitted)."""
ASK_EVERY_SECONDS = 1.0
_FIRST_PAUSE, _LONGEST_PAUSE = 0.02, 0.5


def _listed(state: Any, part: str) -> list[str]:
    items = state.get(part) if isinstance(state, dict) else None
    return [str(x.get("holder")) for x in items or [] if isinstance(x, dict)]


def holders_of(state: Any, collection: str) -> list[str]:
    """The holders of ``collection`` the budget state lists, holding a slot or waiting for one."""
    return [h for h in _listed(state, "leases") + _listed(state, "waiters") if collection_of(h) == collection]


async def read_state(client: DurableClient, entity: Any) -> Any:
    return getattr(await client.read_entity_state(entity), "entity_state", None)


async def release_collection(
    client: DurableClient,
    tenant: str,
    source: str,
    collection: str,
    *,
    token: str = "",
    close: bool = False,
    wait_seconds: float = RELEASE_WAIT_SECONDS,
) -> bool:
    """Give back every slot and queue place of ``collection`` now; True once the state lists none of them. ``close``:
    the run ``token`` names has ended, so its token acquires nothing any more (``shared.budget.machine``).

    Signalled again while any is listed: an ``acquire`` the collection sent just before it was terminated may reach
    the entity after the first release (two senders' messages keep no order between them), and releasing twice
    releases once."""
    entity = entity_id(tenant, source)
    deadline = time.monotonic() + wait_seconds
    pause = _FIRST_PAUSE
    sent_at = 0.0
    while True:
        now = time.monotonic()
        if now - sent_at >= 1.0:
            request = {"collection": collection, **({"close": True} if close else {})}
            await client.signal_entity(entity, "release_collection", _with_token(request, token))
            sent_at = now
        await asyncio.sleep(pause)
        if not holders_of(await read_state(client, entity), collection):
            return True
        if time.monotonic() >= deadline:
            return False
        pause = min(pause * 2, _LONGEST_PAUSE)


@dataclass
class Slot:
    """One slot of a tenant's budget for ``source``, held by ``holder`` (``<name>/0``) while HTTP work runs."""

    client: DurableClient
    tenant: str
    source: str
    options: BudgetOptions
    holder: str = field(default_factory=lambda: holder_id(f"doctor-{uuid.uuid4().hex[:16]}", 0))
    waited: float = 0.0
    ahead: int = 0
    """The most holders queued ahead of this one while it waited."""
    token: str = ""
    """The token of the holder's collection (``BudgetToken``)."""
    granted: bool = False
    queued: bool = False
    """It waited in the budget's queue: all slots were held when it asked."""
    quota_until: str | None = None
    """Graph: the tenant's daily quota was spent (the collector's share of it); a submission may be made again then."""
    credits: int = 0
    """Credits of the daily Graph quota taken: 1 with the grant, one more per :meth:`credit`."""

    @property
    def submits(self) -> bool:
        """The work it holds the slot for submits a Graph query: it takes a credit of the daily quota too."""
        return self.options.quota > 0  # only a source whose queries take a credit has one (settings.budget_quotas)

    @property
    def ask_every(self) -> float:
        """How often a queued slot asks again: its poll period, at most a second (an ask is one signal, and a place
        in the queue is kept whatever the pace, so asking often only takes a slot sooner when it is this one's)."""
        return min(self.options.poll_seconds, ASK_EVERY_SECONDS)

    @property
    def entity(self) -> Any:
        return entity_id(self.tenant, self.source)

    def _request(self) -> JsonDict:
        return _with_token(self.options.acquire(self.holder, submit=1 if self.submits else 0).to_json(), self.token)

    async def acquire(self, wait_seconds: float) -> bool:
        """Ask until granted or ``wait_seconds`` are up (then the queue place is given back)."""
        began = time.monotonic()
        asked_at = began
        await self.client.signal_entity(self.entity, "acquire", self._request())
        pause = _FIRST_PAUSE
        while True:
            await asyncio.sleep(pause)
            state = await read_state(self.client, self.entity)
            now = time.monotonic()
            self.waited = now - began
            if self.holder in _listed(state, "leases"):
                self.granted = True
                self.credits = 1 if self.submits else 0
                return True
            waiters = _listed(state, "waiters")
            if self.holder in waiters:
                self.queued = True
                self.ahead = max(self.ahead, waiters.index(self.holder))
            elif self.submits and self._quota_spent(state):
                await self.release()  # in case the entity granted it after the state was read
                return False
            if now - began >= wait_seconds:
                await self.release()
                return False
            if now - asked_at >= self.ask_every:
                await self.client.signal_entity(self.entity, "acquire", self._request())
                asked_at = now
            pause = min(pause * 2, _LONGEST_PAUSE, self.ask_every)

    def _quota_spent(self, state: Any) -> bool:
        """The state, as of the entity's own clock, says the collector's daily Graph submissions are spent."""
        clock = state.get("clock") if isinstance(state, dict) else None
        if not isinstance(clock, str):
            return False
        view = quota_view(state, parse_iso(clock), self.options.quota)
        if view["left"] > 0:
            return False
        self.quota_until = view["until"]
        return True

    async def credit(self, wait_seconds: float = CREDIT_WAIT_SECONDS) -> str | None:
        """One more credit of the daily quota for another query the held slot's work submits: None once the state
        shows it taken, else why not (nothing may be submitted then). Refused when the allowance is spent: the entity
        gives the slot back, so the rest of the work holds none."""
        if not (self.submits and self.granted):
            return "the doctor holds no Graph slot of the tenant budget any more"
        number = self.credits + 1
        request = _with_token(self.options.acquire(self.holder, submit=number).to_json(), self.token)
        await self.client.signal_entity(self.entity, "acquire", request)
        began = time.monotonic()
        pause = _FIRST_PAUSE
        while True:
            await asyncio.sleep(pause)
            state = await read_state(self.client, self.entity)
            lease = _lease(state, self.holder)
            if lease is not None and lease.get("credited") == number:
                self.credits = number
                return None
            if lease is None:  # refused (the entity gave the slot back) or lost
                self.granted = False
                if self._quota_spent(state):
                    return f"the collector's share of the tenant's daily Graph quota is spent until {self.quota_until}"
                return "the doctor's Graph slot of the tenant budget was lost"
            if time.monotonic() - began >= wait_seconds:
                return f"the tenant budget did not give a credit of the daily quota within {wait_seconds:.0f} s"
            pause = min(pause * 2, _LONGEST_PAUSE)

    async def renew(self) -> None:
        if self.granted:  # a slot the entity gave back (its quota refused) is not renewed into a loss
            await self.client.signal_entity(self.entity, "renew", self._request())

    async def release(self) -> None:
        await self.client.signal_entity(self.entity, "release", _with_token({"holder": self.holder}, self.token))

    def report(self) -> JsonDict:
        return {
            "holder": self.holder,
            "granted": self.granted,
            "queued": self.queued,
            "waitedSeconds": round(self.waited, 3),
            "queuedBehind": self.ahead,
            "capacity": self.options.capacity,
            **({"credits": self.credits} if self.submits else {}),
            **({"quotaUntil": self.quota_until} if self.quota_until else {}),
        }


def _lease(state: Any, holder: str) -> JsonDict | None:
    items = state.get("leases") if isinstance(state, dict) else None
    return next((x for x in items or [] if isinstance(x, dict) and x.get("holder") == holder), None)


@dataclass
class SlotCredits:
    """The Graph slot's credits for the doctor's worker thread (``shared.doctor.resubmit.SubmissionCredits``): each
    ``take`` asks the slot on the event loop the HTTP trigger runs on, and waits for its answer."""

    slot: Slot
    loop: asyncio.AbstractEventLoop
    counted: bool = True

    def take(self) -> str | None:
        future = asyncio.run_coroutine_threadsafe(self.slot.credit(), self.loop)
        try:
            return future.result(timeout=CREDIT_WAIT_SECONDS + 10.0)
        except TimeoutError:
            future.cancel()
            return "the tenant budget did not answer in time"


def quota_refusal(slot: Slot, slots: list[Slot]) -> JsonDict:
    """The 503 of a doctor whose Graph probe would exceed the tenant's daily Graph quota (nothing was probed)."""
    message = (
        "the collector's share of the tenant's daily Graph query submissions is spent (COLLECTOR_GRAPH_DAILY_QUERIES "
        "less COLLECTOR_GRAPH_DAILY_RESERVE, per rolling 24 hours) and the Graph probe submits one: nothing was "
        f"probed; try again after {slot.quota_until}"
    )
    return {
        "error": {"field": "tenantId", "rule": "daily_quota", "message": message},
        "budget": {s.source: s.report() for s in slots},
    }


async def run_holding(slots: list[Slot], work: Callable[[], _T]) -> _T:
    """Run blocking ``work`` in a worker thread while every slot is renewed each third of its lease."""
    task = asyncio.ensure_future(asyncio.to_thread(work))
    period = min((slot.options.renew_seconds for slot in slots), default=0.0)
    while slots and not task.done():
        await asyncio.wait({task}, timeout=period)
        if not task.done():
            for slot in slots:
                await slot.renew()
    return await task
