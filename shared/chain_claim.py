"""Who starts an instance: a claim that exactly one start call wins, for a new collection id, a retry link, or a new
follower.

The Durable start cannot make concurrent starts of one instance id exactly-once: DTFx writes the Instances row after
the ExecutionStarted message, and a start that checks for the instance in between does not see it, so two calls can
both be accepted (the task hub later keeps one execution; both answer 202). A Durable Entity runs one operation at a
time, so the start claim entity (``start_claim``, keyed by a chain's root: a collection id, or a follower id) hands
each start out once: generation 0 is the root's own start (``POST /api/collections`` with a new ``collectionId``,
``POST /api/follows`` for a new follower), generation *n* the chain's *n*-th retry link. The first ``claim`` of a
generation with a higher number than any before takes it, every other claim of it changes nothing, and a caller
learns whether it won by reading the entity's state (a client can only signal an entity and read it).

A claim is signed (``mac``: an HMAC under ``COLLECTOR_BUDGET_SECRET``, checked by the entity when a secret is set), so
someone holding only the system key cannot claim ids ahead of the collector's callers.

A winner that died between its claim and its start would leave the link claimed and never started, so a claim older
than ``STALE_SECONDS`` may be taken over by naming the token it replaces (compare-and-swap); a caller whose claim was
taken over no longer holds it and does not start. State stays one record per chain, whatever the traffic.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.errors import RequestValidationError
from shared.models import JsonDict, iso, parse_iso

STALE_SECONDS = 120.0
"""A claim this old whose link has not started may be taken over. A winner starts within a second or two of seeing
its claim; this is far longer, so a slow winner is never overtaken while it is still going to start."""
MAX_GENERATION = 1_000_000
ROOT = 0
"""The generation of a root's own start (a new collection id, a new follower)."""
UNCLAIMED = -1
_PURPOSE = b"ual-collector/start-claim/v1\n"

_TOKEN = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True, slots=True)
class Claim:
    """One ``claim`` operation: ``generation`` is 0 for the root's own start or the retry number
    (``<root>-retry-<generation>``), ``token`` the caller's own random id, ``replaces`` the token of a stale claim of
    the same generation to take over, ``mac`` the claim's signature (``signed``)."""

    generation: int
    token: str
    replaces: str | None = None
    mac: str = ""

    @classmethod
    def parse(cls, data: Any) -> Claim:
        if not isinstance(data, dict):
            raise RequestValidationError("input", "must be an object")
        generation = data.get("generation")
        if isinstance(generation, bool) or not isinstance(generation, int) or not 0 <= generation <= MAX_GENERATION:
            raise RequestValidationError("generation", f"must be a whole number from 0 to {MAX_GENERATION}")
        token, replaces, mac = data.get("token"), data.get("replaces"), data.get("mac", "")
        if not isinstance(token, str) or not _TOKEN.fullmatch(token):
            raise RequestValidationError("token", "must be 32 lower-case hex digits")
        if replaces is not None and (not isinstance(replaces, str) or not _TOKEN.fullmatch(replaces)):
            raise RequestValidationError("replaces", "must be 32 lower-case hex digits")
        if not isinstance(mac, str) or len(mac) > 64:
            raise RequestValidationError("mac", "must be the claim's signature")
        return cls(generation, token, replaces, mac)

    def signed(self, secret: str, key: str) -> Claim:
        """This claim with its signature for the entity ``key`` ("" without a secret)."""
        return Claim(self.generation, self.token, self.replaces, claim_mac(secret, key, self))

    def to_json(self) -> JsonDict:
        out: JsonDict = {"generation": self.generation, "token": self.token}
        if self.replaces is not None:
            out["replaces"] = self.replaces
        if self.mac:
            out["mac"] = self.mac
        return out


def claim_mac(secret: str, key: str, claim: Claim) -> str:
    """The signature of ``claim`` on the entity ``key`` under ``secret`` ("" without one)."""
    if not secret:
        return ""
    message = _PURPOSE + f"{key}\n{claim.generation}\n{claim.token}\n{claim.replaces or ''}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def claim_signed(secret: str, key: str, claim: Claim) -> bool:
    """The claim was made by the collector (always true without a secret: nothing is authenticated)."""
    return not secret or hmac.compare_digest(claim_mac(secret, key, claim), claim.mac)


@dataclass(slots=True)
class ClaimState:
    """The newest claimed start of one chain: its generation, the winner's token and when it was claimed."""

    generation: int = UNCLAIMED
    token: str = ""
    at: datetime | None = None

    def apply(self, claim: Claim, now: datetime) -> bool:
        """Take the link for ``claim`` if it is owed; True when this claim now holds it."""
        if claim.generation > self.generation:
            self.generation, self.token, self.at = claim.generation, claim.token, now
            return True
        if claim.generation < self.generation:
            return False  # a later link was claimed already: this caller's view of the chain is stale
        if claim.token == self.token:
            return True  # the same claim again (a signal delivered twice)
        stale = self.at is None or now - self.at >= timedelta(seconds=STALE_SECONDS)
        if claim.replaces is not None and claim.replaces == self.token and stale:
            self.token, self.at = claim.token, now
            return True
        return False

    def is_stale(self, now: datetime) -> bool:
        return self.at is None or now - self.at >= timedelta(seconds=STALE_SECONDS)

    def to_json(self) -> JsonDict:
        return {"generation": self.generation, "token": self.token, "at": iso(self.at) if self.at else None}

    @classmethod
    def from_json(cls, data: Any) -> ClaimState:
        if not isinstance(data, dict):
            return cls()
        at = data.get("at")
        generation = data.get("generation", UNCLAIMED)
        return cls(int(generation), str(data.get("token", "")), parse_iso(at) if at else None)
