"""What crosses the wire to and from the tenant budget entity: its key, holder ids, requests and client options.

The budget itself (``shared.budget.machine``) is a pure state machine; this module only names, validates and
(de)serialises. Every value here is checked, because the entity key becomes an instance id (``@tenant_budget@<key>``)
and a request from an orchestration is still input from elsewhere.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from shared import names
from shared.errors import RequestValidationError
from shared.models import SOURCES, JsonDict

OPERATIONS = ("acquire", "renew", "renew_collection", "release", "release_collection", "status")
"""``acquire`` asks for (or keeps) a slot and joins the queue if none is free (with ``release``, it first gives back
the slot of a lane of the same collection that just ended; with ``submit``, it also takes a credit of the tenant's
daily Graph query submissions, or is refused until one is free: ``shared.budget.quota``); ``renew`` keeps a held
slot without queueing; ``renew_collection`` renews the listed holders of one collection at once (one operation per
renewal period for the whole collection, instead of one per lane); ``release`` gives a slot (or a queue place) back;
``release_collection`` releases every holder of one collection (with ``close``, the run its token names has ended: its
token acquires nothing any more); ``status`` answers a snapshot. Every operation but ``status`` carries the run's
``token``."""

_HOLDER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_-]{0,63})/([0-9]{1,9})$")
MAX_LEASE_SECONDS = 86_400.0
MAX_HOLDERS = 1000
"""Holders one ``renew_collection`` may list (a collection's K is at most 100 lanes)."""
MIN_WAIT_SECONDS = 0.01
MAX_SUBMISSION = 1_000_000_000
"""The highest submission number an ``acquire`` may carry."""
MAX_CREDITS = 100
"""The most submission credits one ``acquire`` may ask for (``credits``), and one ``release_collection`` give back
(``refund``): a collection keeps a few credits at hand, never a day's worth."""
SLOT_MARGIN_SECONDS = 10.0
_TOKEN = re.compile(r"^[0-9a-f]{0,64}$")
"""A token: a run id (32 hex) and an HMAC (32 hex), an HMAC alone, or nothing (no secret)."""


def entity_key(tenant_id: str, source: str) -> str:
    """``<tenant>:<source>`` with the tenant lower-cased exactly as object names use it (ASCII only, no stripping).

    The collector keys every budget by the tenant's GUID (``CollectionSpec.budget_tenant``: the HTTP starter resolves
    a domain to it), so every spelling of one tenant shares one budget. A domain is still a valid key: an
    orchestration input written before the GUID was carried replays against the entity its lanes hold slots of.
    """
    if source not in SOURCES:
        raise RequestValidationError("source", f"must be one of {', '.join(SOURCES)}")
    try:
        tenant = names.tenant_component(tenant_id)
    except ValueError:
        raise RequestValidationError("tenantId", "must be a GUID or a DNS domain name") from None
    return f"{tenant}:{source}"


def parse_entity_key(key: str) -> tuple[str, str]:
    """``(tenant, source)`` of a key made by ``entity_key``; anything else is refused (and owns no budget)."""
    tenant, _, source = key.rpartition(":")
    if entity_key(tenant, source) != key:
        raise RequestValidationError("entityKey", "must be <tenant>:<source>, lower case")
    return tenant, source


def holder_id(collection_id: str, lane: int) -> str:
    """The stable id of one lane of one collection: ``<collection>/<lane>`` (never a request id, which changes
    when an orchestration episode is retried)."""
    holder = f"{collection_id}/{lane}"
    if not _HOLDER.fullmatch(holder):
        raise RequestValidationError("holder", "must be <collection id>/<lane number>")
    return holder


def collection_of(holder: str) -> str:
    return holder.partition("/")[0]


@dataclass(frozen=True, slots=True)
class BudgetRequest:
    """One operation on the budget. ``lease_seconds``: how long a grant lasts unless renewed; ``wait_seconds``: how
    soon a queued holder promises to ask again."""

    op: str
    holder: str = ""
    collection: str = ""
    lease_seconds: float = 600.0
    wait_seconds: float = 10.0
    holders: tuple[str, ...] = ()
    """``renew_collection``: the holders (all of ``collection``) whose slots to renew."""
    token: str = ""
    """The collection's token (``shared.budget.token``), checked by the entity when a secret is configured."""
    release: str = ""
    """``acquire``: a holder of the same collection to release first (the lane that just ended)."""
    close: bool = False
    """``release_collection``: the run has ended; later operations with its token are refused."""
    submit: int = 0
    """``acquire``: the number of the Graph query submission this slot is asked for (unique within the collection;
    0: none). Granted, it takes one credit of the tenant's daily submissions, once per number: an ``acquire`` re-sent
    with the same number (after a crash) takes none."""
    credits: int = 0
    """``acquire`` with ``submit``: how many credits to take at once (0 or 1: one). The budget takes as many as the
    tenant has left, at least one, and says how many (``credits``); the collection keeps the others for its next
    submissions, so a lane that keeps its slot across chunks does not ask the budget before each query."""
    refund: int = 0
    """``release_collection`` with ``close``: credits the run took and did not spend, given back to the day's quota
    (once: a run already closed gives nothing back)."""

    @property
    def owner(self) -> str:
        """The collection this request acts for ("" for ``status``)."""
        return self.collection or collection_of(self.holder)

    @classmethod
    def parse(cls, op: str | None, data: Any) -> BudgetRequest:
        if op not in OPERATIONS:
            raise RequestValidationError("operation", f"must be one of {', '.join(OPERATIONS)}")
        if op == "status":
            return cls(op)
        if not isinstance(data, dict):
            raise RequestValidationError("input", "must be an object")
        token = data.get("token", "")
        if not isinstance(token, str) or not _TOKEN.fullmatch(token):
            raise RequestValidationError("token", "must be the collection's budget token (hex)")
        if op == "release_collection":
            collection = data.get("collection")
            if not isinstance(collection, str) or not names.is_safe_id(collection):
                raise RequestValidationError("collection", "must be a collection id")
            close = data.get("close", False)
            if not isinstance(close, bool):
                raise RequestValidationError("close", "must be true or false")
            refund = _count(data.get("refund", 0), "refund") if close else 0
            return cls(op, collection=collection, token=token, close=close, refund=refund)
        if op == "renew_collection":
            return cls._renew_collection(data, token)
        holder = data.get("holder")
        if not isinstance(holder, str) or not _HOLDER.fullmatch(holder):
            raise RequestValidationError("holder", "must be <collection id>/<lane number>")
        if op == "release":
            return cls(op, holder=holder, token=token)
        lease = _seconds(data.get("leaseSeconds"), "leaseSeconds", 1.0, MAX_LEASE_SECONDS)
        wait = _seconds(data.get("waitSeconds"), "waitSeconds", MIN_WAIT_SECONDS, lease)
        release = data.get("release", "") if op == "acquire" else ""
        submit = data.get("submit", 0) if op == "acquire" else 0
        if isinstance(submit, bool) or not isinstance(submit, int) or not 0 <= submit <= MAX_SUBMISSION:
            raise RequestValidationError("submit", f"must be a submission number between 0 and {MAX_SUBMISSION}")
        credits = _count(data.get("credits", 0), "credits") if submit else 0
        if release and (
            not isinstance(release, str)
            or not _HOLDER.fullmatch(release)
            or collection_of(release) != collection_of(holder)
        ):
            raise RequestValidationError("release", "must be a holder id of the same collection")
        return cls(
            op,
            holder=holder,
            lease_seconds=lease,
            wait_seconds=wait,
            token=token,
            release=release,
            submit=submit,
            credits=credits,
        )

    @classmethod
    def _renew_collection(cls, data: JsonDict, token: str) -> BudgetRequest:
        collection = data.get("collection")
        if not isinstance(collection, str) or not names.is_safe_id(collection):
            raise RequestValidationError("collection", "must be a collection id")
        holders = data.get("holders")
        if not isinstance(holders, list) or len(holders) > MAX_HOLDERS:
            raise RequestValidationError("holders", f"must be a list of at most {MAX_HOLDERS} holder ids")
        for holder in holders:
            if not isinstance(holder, str) or not _HOLDER.fullmatch(holder) or collection_of(holder) != collection:
                raise RequestValidationError("holders", "must be <collection id>/<lane number> of that collection")
        lease = _seconds(data.get("leaseSeconds"), "leaseSeconds", 1.0, MAX_LEASE_SECONDS)
        wait = _seconds(data.get("waitSeconds"), "waitSeconds", MIN_WAIT_SECONDS, lease)
        return cls(
            "renew_collection",
            collection=collection,
            lease_seconds=lease,
            wait_seconds=wait,
            holders=tuple(holders),
            token=token,
        )

    def to_json(self) -> JsonDict:
        if self.op == "status":
            return {}
        data: JsonDict
        if self.op == "renew_collection":
            data = {
                "collection": self.collection,
                "holders": list(self.holders),
                "leaseSeconds": self.lease_seconds,
                "waitSeconds": self.wait_seconds,
            }
        elif self.op == "release_collection":
            data = {"collection": self.collection, **({"close": True} if self.close else {})}
            if self.refund:
                data["refund"] = self.refund
        elif self.op == "release":
            data = {"holder": self.holder}
        else:
            data = {"holder": self.holder, "leaseSeconds": self.lease_seconds, "waitSeconds": self.wait_seconds}
            if self.release:
                data["release"] = self.release
            if self.submit:
                data["submit"] = self.submit
            if self.credits > 1:
                data["credits"] = self.credits
        if self.token:
            data["token"] = self.token
        return data


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CREDITS:
        raise RequestValidationError(field, f"must be a number of credits between 0 and {MAX_CREDITS}")
    return value


def _seconds(value: Any, field: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RequestValidationError(field, "must be a number of seconds")
    if not low <= value <= high:
        raise RequestValidationError(field, f"must be between {low:g} and {high:g}")
    return float(value)


@dataclass(frozen=True, slots=True)
class BudgetOptions:
    """How a collection uses its tenant's budget, fixed when it starts (so a settings change never alters a replay).

    ``capacity`` 0 means no budget: the collection never calls the entity. A held slot is renewed every third of
    its lease, so two renewals can be late before it lapses; a queued lane asks again every ``poll_seconds``.
    ``quota``: the Graph query submissions the collector may make per rolling 24 hours in the tenant (its daily
    quota less the reserve left to other tools); a lane takes a credit before each submission. 0: no credits are
    asked (Exchange, and an input written before the quota was kept).

    ``keep``: a lane's slot stays with the collection's next chunk while the budget's latest answer (a renewal's, at
    least every third of a lease) says nobody waits, however long the chunk ran, and Graph credits are taken a few at
    once (``shared.window.budget``). False for an input written before it (its executions replay as they ran).

    ``ride``: the collection's renewal goes out with an episode of the window near its due time (the lanes' timers
    and waiting status checks wake it every few seconds to a minute while queries run), and a renewal timer is set
    only when no lane will wake the window before the renewal's slack ends (``shared.window.budget_keep``). False for
    an input written before window version 2.
    """

    capacity: int = 0
    lease_seconds: float = 600.0
    poll_seconds: float = 10.0
    quota: int = 0
    keep: bool = False
    ride: bool = False

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    @property
    def renew_seconds(self) -> float:
        return self.lease_seconds / 3

    @property
    def margin_seconds(self) -> float:
        """How long before its lease ends a slot counts as gone: room for the clocks of the worker that ran the
        entity and of the one that runs an activity to differ (NTP keeps Azure's within a second)."""
        return min(SLOT_MARGIN_SECONDS, self.lease_seconds / 10)

    @property
    def keeps_quota(self) -> bool:
        """Lanes take a submission credit before each Graph query they submit."""
        return self.enabled and self.quota > 0

    def acquire(
        self, holder: str, *, token: str = "", release: str = "", submit: int = 0, credits: int = 0
    ) -> BudgetRequest:
        return BudgetRequest(
            "acquire",
            holder,
            lease_seconds=self.lease_seconds,
            wait_seconds=self.poll_seconds,
            token=token,
            release=release,
            submit=submit,
            credits=credits if submit else 0,
        )

    def renew(self, holder: str, *, token: str = "") -> BudgetRequest:
        return BudgetRequest(
            "renew", holder, lease_seconds=self.lease_seconds, wait_seconds=self.poll_seconds, token=token
        )

    def renew_collection(self, collection: str, holders: list[str], *, token: str = "") -> BudgetRequest:
        return BudgetRequest(
            "renew_collection",
            collection=collection,
            lease_seconds=self.lease_seconds,
            wait_seconds=self.poll_seconds,
            holders=tuple(holders),
            token=token,
        )

    def to_json(self) -> JsonDict:
        return {
            "capacity": self.capacity,
            "leaseSeconds": self.lease_seconds,
            "pollSeconds": self.poll_seconds,
            "quota": self.quota,
            **({"keep": True} if self.keep else {}),
            **({"ride": True} if self.ride else {}),
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> BudgetOptions:
        if not data:
            return cls()
        return cls(
            int(data["capacity"]),
            float(data["leaseSeconds"]),
            float(data["pollSeconds"]),
            int(data.get("quota", 0)),
            bool(data.get("keep", False)),
            bool(data.get("ride", False)),
        )
