"""What one episode of an execution leaves for the next, so that the next serialises only new history events and
parses only new actions.

Every episode hands the worker the whole history of the execution as JSON (``context_json``) and the worker answers
with every action of the execution (the SDK replays the orchestrator from the start). Between two episodes of one
execution the history only grows at its end and the answer repeats the previous one and adds a few actions. So an
``ExecutionCache`` keeps:

* the past events of the episode as it saw them (after reconciliation) with the JSON text each had in the context;
  the next episode reuses those texts when these events are a prefix of its own past events (list equality of the
  JSON values, a C-speed comparison far cheaper than encoding them again), and encodes only the rest;
* the worker's answer as JSON values and as parsed actions (``actions.ParsedActions``); the next answer reuses an
  action equal to the one in the same place.

The cache is a pure value: ``run_episode`` takes one in ``EpisodeInput.cache`` and returns the next in
``EpisodeResult.cache``; one of another instance or execution is ignored, and one whose events are not a prefix of the
episode's past is not used. The engine keeps one per instance, only for the history its own checkpoint wrote
(``durable_local.dispatch.episode_caches``). Nothing in it changes what the worker receives: the cached context JSON is
the uncached one byte for byte (``tests/engine/replay/test_execution_cache.py``, over a real collection's episodes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from durable_local.model import HistoryEvent
from durable_local.replay.actions import ParsedActions


@dataclass(frozen=True, slots=True)
class ExecutionCache:
    instance_id: str
    execution_id: str
    events: list[HistoryEvent]
    """The episode's past events (its own copies, which nothing changes afterwards)."""
    texts: list[str]
    """``past_event_json`` of each of ``events``."""
    actions: ParsedActions | None
    """The worker's answer (None when it gave none that parsed)."""
    chars: int
    """Characters of ``texts`` (what the engine bounds)."""
    reused_events: int = 0
    """How many of ``texts`` this episode took from the previous cache instead of encoding them."""

    @property
    def reused_actions(self) -> int:
        return self.actions.reused if self.actions is not None else 0

    def applies_to(self, instance_id: str, execution_id: str) -> bool:
        return self.instance_id == instance_id and self.execution_id == execution_id


def past_event_json(event: HistoryEvent) -> str:
    """One past event as ``context_json.build_context_json`` writes it inside ``history``."""
    return json.dumps({**event, "IsPlayed": True})


def past_texts(past: list[HistoryEvent], cache: ExecutionCache | None) -> tuple[list[str], int, int]:
    """The context JSON text of each past event, the previous cache's where its events are a prefix of ``past``:
    (texts, how many were reused, their total characters)."""
    texts: list[str] = []
    chars = 0
    if cache is not None:
        count = len(cache.events)
        if count <= len(past) and past[:count] == cache.events:
            texts = list(cache.texts)
            chars = cache.chars
    reused = len(texts)
    for event in past[reused:]:
        text = past_event_json(event)
        texts.append(text)
        chars += len(text)
    return texts, reused, chars
