"""What the window sends the ``tenant_budget`` entity and what it reads from the answers: the entity protocol.

* A lane asks for a slot with ``acquire`` for its holder id ``<collection>/<lane>`` (the lane number of the slot it
  used, kept across continue-as-new); the answer is a grant or a queue place, in one call, with the slots' lease end,
  the capacity, how many are held and how many wait, and the daily quota's figures. A slot of a lane that ended can
  be released in the same call (``release``), and the acquire takes the lane's quota credits (``budget_credits``).
* A slot goes back with a one-way ``release`` signal; the collection's slots are renewed together with one
  ``renew_collection`` (``budget_keep``).
* Every operation carries the collection's token (``shared.budget.token``) from the orchestration input.
"""

from __future__ import annotations

from shared.budget.wire import BudgetOptions, BudgetRequest, holder_id
from shared.models import JsonDict
from shared.window.budget_credits import QuotaCredits
from shared.window.budget_host import BudgetHost
from shared.window.state import RENEW, CallEntity, Lane, SignalEntity, Slot


class BudgetCalls:
    """The collection's requests to the tenant budget, and what its answers teach the window."""

    def __init__(self, window: BudgetHost, options: BudgetOptions, token: str, credits: QuotaCredits) -> None:
        self.window = window
        self.options = options
        self.token = token
        """The collection's token, sent with every operation (from the orchestration input; "" without a secret)."""
        self.credits = credits
        self.free_slots = 1
        """Slots the budget's latest answer left free with nobody waiting: how many lanes may ask at once (one before
        any answer)."""

    # --- holder ids -------------------------------------------------------------------------------------------
    def holder_number(self, lane: Lane) -> int:
        return lane.slot.holder if lane.slot is not None else lane.id

    def holder(self, lane: Lane) -> str:
        return holder_id(self.window.spec.collection_id, self.holder_number(lane))

    def slot_holder(self, slot: Slot) -> str:
        return holder_id(self.window.spec.collection_id, slot.holder)

    # --- requests ---------------------------------------------------------------------------------------------
    def acquire(self, lane: Lane, release: Slot | None = None) -> CallEntity:
        """A slot for the lane (renewed when it holds one), its quota credits, and ``release``'s slot given back."""
        lane.issued_at = self.window.now
        released = self.slot_holder(release) if release is not None else ""
        submit, credits = self.credits.for_acquire(lane)
        request = self.options.acquire(
            self.holder(lane), token=self.token, release=released, submit=submit, credits=credits
        )
        return CallEntity(lane.id, "acquire", request.to_json())

    def release(self, holder: str) -> SignalEntity:
        return SignalEntity("release", BudgetRequest("release", holder, token=self.token).to_json())

    def renew(self, holders: list[str]) -> CallEntity:
        request = self.options.renew_collection(self.window.spec.collection_id, holders, token=self.token)
        return CallEntity(RENEW, "renew_collection", request.to_json())

    # --- answers ----------------------------------------------------------------------------------------------
    def learn(self, answer: JsonDict) -> None:
        """The quota's figures, the slots left free and how many wait, and when the answer came."""
        quota = answer.get("quota")
        if isinstance(quota, dict):
            self.window.state.budget_quota = dict(quota)
        if all(isinstance(answer.get(key), int) for key in ("capacity", "held", "waiting")):
            state = self.window.state
            self.free_slots = int(answer["capacity"]) - int(answer["held"]) - int(answer["waiting"])
            state.budget_waiting = int(answer["waiting"])
            state.budget_seen_at = self.window.now

    def count_loss(self, lane: Lane, answer: JsonDict) -> None:
        """A lane that asked again with a slot it held counts a loss unless it got the same grant back."""
        if lane.slot is None or lane.slot.grant is None:
            return
        if not answer.get("granted") or answer.get("grant") != lane.slot.grant:
            self.window.state.budget_lost += 1
        lane.slot.grant = None
