"""Counters the dispatchers keep for ``Engine.stats()``, tests and benchmarks (thread-safe)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

EventHook = Callable[[str, dict[str, Any]], None]
"""Observer for engine events: ``(kind, data)``; kinds include ``activity_started``, ``activity_finished``,
``episode_completed``, ``session_abandoned``, ``messages_discarded``."""


@dataclass(slots=True)
class _Values:
    activity_executions: Counter[str] = field(default_factory=Counter)
    activity_failures: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    peak_in_flight: int = 0
    in_flight_at_start: list[int] = field(default_factory=list)
    episodes: int = 0
    entity_episodes: int = 0
    replayed_events: int = 0
    entity_operations: int = 0
    reused_events: int = 0
    reused_actions: int = 0
    episode_seconds: float = 0.0
    replay_seconds: float = 0.0
    checkpoint_seconds: float = 0.0
    split_brain: int = 0
    out_of_order_abandoned: int = 0
    discarded_messages: int = 0
    episode_errors: int = 0
    activity_renewals: int = 0
    entity_batches_aborted: int = 0


class EngineCounters:
    def __init__(self, on_event: EventHook | None = None) -> None:
        self._lock = threading.Lock()
        self._v = _Values()
        self._on_event = on_event

    def emit(self, kind: str, **data: Any) -> None:
        if self._on_event is not None:
            self._on_event(kind, data)

    def activity_started(self, name: str) -> int:
        """Count a start; returns the in-flight count including this activity."""
        with self._lock:
            self._v.activity_executions[name] += 1
            self._v.in_flight += 1
            self._v.peak_in_flight = max(self._v.peak_in_flight, self._v.in_flight)
            self._v.in_flight_at_start.append(self._v.in_flight)
            now = self._v.in_flight
        self.emit("activity_started", name=name, in_flight=now)
        return now

    def activity_finished(self, name: str, *, failed: bool) -> None:
        with self._lock:
            self._v.in_flight -= 1
            if failed:
                self._v.activity_failures[name] += 1
            now = self._v.in_flight
        self.emit("activity_finished", name=name, failed=failed, in_flight=now)

    def episode(
        self,
        *,
        total: float,
        replay: float,
        checkpoint: float,
        entity: bool = False,
        replayed_events: int = 0,
        entity_operations: int = 0,
        reused_events: int = 0,
        reused_actions: int = 0,
    ) -> None:
        """One checkpointed episode: an entity batch of ``entity_operations``, or an orchestration episode that handed
        the worker ``replayed_events`` past events (of which ``reused_events`` kept their JSON from the previous
        episode, and ``reused_actions`` of its answer were not parsed again)."""
        with self._lock:
            v = self._v
            v.episodes += 1
            v.episode_seconds += total
            v.replay_seconds += replay
            v.checkpoint_seconds += checkpoint
            v.entity_episodes += int(entity)
            v.replayed_events += replayed_events
            v.entity_operations += entity_operations
            v.reused_events += reused_events
            v.reused_actions += reused_actions

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self._v, name, getattr(self._v, name) + amount)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            v = self._v
            return {
                "activity_executions": dict(v.activity_executions),
                "activity_failures": dict(v.activity_failures),
                "activities_in_flight": v.in_flight,
                "activities_peak_in_flight": v.peak_in_flight,
                "activities_in_flight_at_start": list(v.in_flight_at_start),
                "episodes": v.episodes,
                "orchestration_episodes": v.episodes - v.entity_episodes,
                "entity_episodes": v.entity_episodes,
                "replayed_events": v.replayed_events,
                "entity_operations": v.entity_operations,
                "reused_events": v.reused_events,
                "reused_actions": v.reused_actions,
                "episode_seconds": v.episode_seconds,
                "replay_seconds": v.replay_seconds,
                "checkpoint_seconds": v.checkpoint_seconds,
                "split_brain": v.split_brain,
                "out_of_order_abandoned": v.out_of_order_abandoned,
                "discarded_messages": v.discarded_messages,
                "episode_errors": v.episode_errors,
                "activity_renewals": v.activity_renewals,
                "entity_batches_aborted": v.entity_batches_aborted,
            }
